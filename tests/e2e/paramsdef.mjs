// paramsdef.mjs: the parameter names each scene declares in sim/<scene>/params.def (the
// X-macro lists described at the top of each file), read without a compiler:
//   P(type, field, ...), C(field, ...), I(type, field, ...)  -> "field"
//   A(type, field, index, ...)                                 -> "field.index"
//   T(type, field, ...)  (one per tissue class, "tissue.<class>.field" on the wire: the
//                         class names live in the scene's C code)  -> "field"
// Used by the no-names test and the scene extension test; both check what is read here
// against a live server's param_schema, so a change of the list's syntax cannot leave
// this reader finding nothing.
import fs from 'node:fs';
import path from 'node:path';

const ROOT = new URL('../../', import.meta.url).pathname;

/** [{scene, kind: 'P'|'A'|'C'|'T'|'I', field, name}] of every sim/<scene>/params.def
 *  under root. */
export function declaredParams(root = ROOT) {
  const out = [];
  for (const scene of fs.readdirSync(path.join(root, 'sim')).sort()) {
    const file = path.join(root, 'sim', scene, 'params.def');
    if (!fs.existsSync(file)) continue;
    // Comments out (the header describes the macros with the same syntax).
    const text = fs.readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    const re = /^\s*([PACTI])\(\s*(?:(?:FLOAT|INT)\s*,\s*)?([A-Za-z_]\w*)\s*,\s*([^,]*)/gm;
    for (let m; (m = re.exec(text));) {
      const [, kind, field, next] = m;
      const name = kind === 'A' ? `${field}.${next.trim()}` : field;
      out.push({ scene, kind, field, name });
    }
  }
  return out;
}

/** Does the declared parameter d name the schema entry called name? */
export function matches(d, name) {
  return d.kind === 'T' ? name.startsWith('tissue.') && name.endsWith(`.${d.field}`) : name === d.name;
}
