package etcdharness

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"
)

// TLSFiles are the PEM files of a TLS cluster, made by MakeTLS: a CA, the
// server certificate every member serves (IP SAN 127.0.0.1), a client
// certificate signed by the CA, and a client certificate signed by another
// CA (OtherCA), which the cluster refuses.
type TLSFiles struct {
	// CA is the certificate of the CA the cluster trusts.
	CA string
	// ServerCert and ServerKey are the members' serving certificate and
	// key.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate the cluster
	// accepts.
	ClientCert, ClientKey string
	// OtherCA is a CA the cluster does not trust; OtherClientCert and
	// OtherClientKey are a client certificate it signed.
	OtherCA                         string
	OtherClientCert, OtherClientKey string
}

// MakeTLS writes a fresh CA, server and client certificates (ECDSA P-256,
// valid for one day) into dir, 0600, and returns their paths.
func MakeTLS(dir string) (*TLSFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f := &TLSFiles{
		CA:              filepath.Join(dir, "ca.pem"),
		ServerCert:      filepath.Join(dir, "server.pem"),
		ServerKey:       filepath.Join(dir, "server-key.pem"),
		ClientCert:      filepath.Join(dir, "client.pem"),
		ClientKey:       filepath.Join(dir, "client-key.pem"),
		OtherCA:         filepath.Join(dir, "other-ca.pem"),
		OtherClientCert: filepath.Join(dir, "other-client.pem"),
		OtherClientKey:  filepath.Join(dir, "other-client-key.pem"),
	}
	ca, caKey, err := makeCA("sandbox-resume test CA", f.CA)
	if err != nil {
		return nil, err
	}
	other, otherKey, err := makeCA("sandbox-resume other CA", f.OtherCA)
	if err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "etcd"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:    []string{"localhost"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if err := makeLeaf(server, ca, caKey, f.ServerCert, f.ServerKey); err != nil {
		return nil, err
	}
	client := &x509.Certificate{Subject: pkix.Name{CommonName: "sandbox-resume"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := makeLeaf(client, ca, caKey, f.ClientCert, f.ClientKey); err != nil {
		return nil, err
	}
	otherClient := &x509.Certificate{Subject: pkix.Name{CommonName: "sandbox-resume"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if err := makeLeaf(otherClient, other, otherKey, f.OtherClientCert, f.OtherClientKey); err != nil {
		return nil, err
	}
	return f, nil
}

// ClientConfig returns a TLS client configuration trusting the cluster's CA
// and presenting the given client certificate and key (none when both are
// empty).
func (f *TLSFiles) ClientConfig(cert, key string) (*tls.Config, error) {
	pem, err := os.ReadFile(f.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", f.CA)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert != "" || key != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

var serial atomic.Int64

func nextSerial() *big.Int {
	return big.NewInt(time.Now().UnixNano() + serial.Add(1))
}

func makeCA(name, certPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          nextSerial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func makeLeaf(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = nextSerial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyPath, "EC PRIVATE KEY", kder)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
