// panel.mjs: the parameter panel, drawn from the scene's own list. The first `state`
// message of a connection carries `param_schema` (protocol/README.md): per parameter its
// name, type (float, int or choice), min, max, default, unit, group, doc and, for a
// choice, the names of its values. Every state message carries `params`, {name: value},
// a choice by its name. The panel knows no parameter and no scene: a scene that declares
// one more parameter gets one more input here, with nothing written in this client.
//
// - One group (a <details>) per `group`, in the order the scene lists them; when the state
//   names `param_groups` (the session's facts), only those are shown.
// - float and int: a number input with min, max and step (int: 1), the unit beside the
//   label; choice: a select whose options are the choice names (sent as their index).
// - The doc is the row's caption and tooltip; the default is in the tooltip too.
// - Values come from the state messages (viewers see the driver's values live); inputs are
//   disabled for viewers; the input being edited is left alone until it loses focus.
// - A change is sent as set_params {name: number}; a refusal (out of range, not the
//   driver) is shown under the panel with the server's words.
import { h } from './dom.mjs';

// Shown values: six significant digits (the server's values are float32).
const show = (v) => String(Number(v.toPrecision(6)));

/** Labels inside a group: the part after the dotted prefix every name of the group
 *  shares ("a.b.x", "a.b.y" -> "x", "y"); underscores read as spaces. */
export function paramLabels(names) {
  const parts = names.map((n) => n.split('.'));
  let k = 0;
  if (names.length > 1)
    while (parts.every((p) => p.length > k + 1 && p[k] === parts[0][k])) k++;
  return parts.map((p) => {
    const rest = p.slice(k).join('.');
    // An array's element alone ("0 (HU)") says nothing: it keeps its array's name.
    return (/^\d+$/.test(rest) && k > 0 ? `${p[k - 1]} ${rest}` : rest).replaceAll('_', ' ');
  });
}

export class ParamPanel {
  /** root: the element the panel fills; send(params) sends set_params and returns its seq. */
  constructor(root, send) {
    this.root = root;
    this.send = send;
    this.schemaText = null;
    this.inputs = new Map(); // name -> { p: schema entry, el: input or select }
    this.sent = new Map();   // seq -> name, for the server's refusals
    this.driver = false;
    this.error = h('p', { class: 'error param-error', hidden: true });
  }

  /** A param_schema from a state message: (re)build when it differs from the one shown. */
  schema(list) {
    const text = JSON.stringify(list);
    if (text === this.schemaText) return;
    this.schemaText = text;
    this.inputs.clear();
    const groups = new Map();
    for (const p of list) {
      if (!groups.has(p.group)) groups.set(p.group, []);
      groups.get(p.group).push(p);
    }
    const sections = [...groups].map(([group, ps]) => {
      const names = paramLabels(ps.map((p) => p.name));
      return h('details', { class: 'param-group', open: true, dataset: { group } },
        h('summary', {}, group || 'parameters'),
        ps.map((p, i) => this.row(p, names[i])));
    });
    this.root.replaceChildren(...sections, this.error);
  }

  row(p, label) {
    const id = `param-${p.name}`;
    const tip = `${p.name}: ${p.doc} (default ${p.type === 'choice' ? p.choices?.[p.default] : p.default}` +
      `${p.unit ? ` ${p.unit}` : ''})`;
    let el;
    if (p.type === 'choice') {
      el = h('select', { id, dataset: { param: p.name } },
        (p.choices ?? []).map((c, i) => h('option', { value: String(i) }, c)));
      el.addEventListener('change', () => this.set(p, Number(el.value)));
    } else {
      el = h('input', {
        id, type: 'number', min: p.min, max: p.max, step: p.type === 'int' ? 1 : 'any',
        dataset: { param: p.name },
      });
      el.addEventListener('change', () => {
        const v = Number(el.value);
        if (el.value !== '' && Number.isFinite(v)) this.set(p, v);
      });
    }
    el.disabled = !this.driver;
    this.inputs.set(p.name, { p, el });
    return h('div', { class: 'param', title: tip, dataset: { paramRow: p.name } },
      h('label', { for: id }, label, p.unit ? h('span', { class: 'unit' }, ` (${p.unit})`) : null),
      el,
      h('small', { class: 'doc' }, p.doc));
  }

  set(p, v) {
    this.error.hidden = true;
    const seq = this.send({ [p.name]: v });
    if (seq) this.sent.set(seq, p.name);
    if (this.sent.size > 64) this.sent.delete(this.sent.keys().next().value);
  }

  /** A state message: role and values. */
  state(st) {
    if (st.param_schema) this.schema(st.param_schema);
    // A scene whose sessions differ (growth's plant and truss) may name the groups that apply.
    if (Array.isArray(st.param_groups))
      for (const el of this.root.querySelectorAll('.param-group')) el.hidden = !st.param_groups.includes(el.dataset.group);
    this.driver = st.role === 'driver';
    for (const [name, { p, el }] of this.inputs) {
      el.disabled = !this.driver;
      const v = st.params?.[name];
      if (v === undefined || document.activeElement === el) continue;
      if (p.type === 'choice') {
        const i = typeof v === 'number' ? v : (p.choices ?? []).indexOf(v);
        if (i >= 0) el.value = String(i);
      } else if (typeof v === 'number') {
        el.value = show(v);
      }
    }
  }

  /** An error reply: shown when it answers one of the panel's changes. */
  refused(t) {
    const name = this.sent.get(t.seq);
    if (name === undefined) return false;
    this.sent.delete(t.seq);
    this.error.textContent = `${t.error}: ${t.detail ?? ''}`;
    this.error.hidden = false;
    return true;
  }
}
