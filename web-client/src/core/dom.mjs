// dom.mjs: h(tag, props, ...children), a small element builder for the panel and the
// scene modules. props: attributes (class, id, title, for, name, type, ...), `dataset`
// (an object), `on` (event name -> handler), and `hidden`/`disabled`/`value` as properties.
// Children: elements, strings (text), or null/false (skipped).
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props ?? {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'on') for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === 'hidden' || k === 'disabled' || k === 'value' || k === 'checked') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}
