// Validates many JSON documents against the generated schemas in one node
// process, with ajv's Draft 2020-12 dialect, ajv-formats and strict mode
// (the stock validator of issue 9). Run by schemas/validator_test.go with
// NODE_PATH pointing at .tools/node_modules.
//
// stdin:  {"dir": DIR, "docs": [{"id": ID, "schema": FILE or FILE#/$defs/X,
//          "data": base64 of the document's bytes}]}
// stdout: [{"id": ID, "valid": bool, "parseError"?: TEXT,
//           "errors": [{"instancePath", "keyword", "params", "message"}]}]
'use strict';
const fs = require('fs');
const path = require('path');
const Ajv2020 = require('ajv/dist/2020').default;
const addFormats = require('ajv-formats').default;

const job = JSON.parse(fs.readFileSync(0, 'utf8'));
const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
const ids = {};
for (const f of fs.readdirSync(job.dir).filter((f) => f.endsWith('.schema.json')).sort()) {
  const schema = JSON.parse(fs.readFileSync(path.join(job.dir, f), 'utf8'));
  ajv.addSchema(schema);
  ids[f] = schema.$id;
}
const cache = {};
function validator(name) {
  if (!cache[name]) {
    const [file, frag] = name.split('#');
    if (!ids[file]) throw new Error('no schema ' + file);
    const v = ajv.getSchema(ids[file] + (frag ? '#' + frag : ''));
    if (!v) throw new Error('no schema ' + name);
    cache[name] = v;
  }
  return cache[name];
}
const out = job.docs.map((d) => {
  let inst;
  try {
    inst = JSON.parse(Buffer.from(d.data, 'base64').toString('utf8'));
  } catch (e) {
    return { id: d.id, valid: false, parseError: String(e.message), errors: [] };
  }
  const v = validator(d.schema);
  const valid = v(inst);
  return {
    id: d.id,
    valid,
    errors: (v.errors || []).map((e) => ({
      instancePath: e.instancePath, keyword: e.keyword, params: e.params, message: e.message,
    })),
  };
});
process.stdout.write(JSON.stringify(out));
