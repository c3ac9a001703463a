// The Kubernetes manifests (deploy/k8s/): each overlay rendered by kubectl kustomize (the
// kubectl that make test-deps installs: Debian 12's reads these as newer ones do), then
// checked for what the deployment depends on: stable pod names in the session ids, the
// GPU request, probes on /api/health, the drain on termination, the disruption budget, the
// scrape annotations, the router's rules. (No API server here, so kubectl --dry-run cannot
// run; these checks are the schema.)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { parseAllDocuments } from 'yaml';

const ROOT = new URL('../..', import.meta.url).pathname;

function render(overlay) {
  const out = execFileSync('kubectl', ['kustomize', `${ROOT}deploy/k8s/overlays/${overlay}`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const docs = parseAllDocuments(out).map((d) => d.toJS());
  for (const d of docs) {
    assert.ok(d.apiVersion && d.kind && d.metadata?.name, `not a Kubernetes object: ${JSON.stringify(d).slice(0, 80)}`);
    assert.equal(d.metadata.namespace ?? (d.kind === 'Namespace' ? undefined : 'missing'), d.kind === 'Namespace' ? undefined : 'softcast', `${d.kind} ${d.metadata.name}: namespace`);
  }
  const one = (kind, name) => {
    const found = docs.filter((d) => d.kind === kind && (name === undefined || d.metadata.name === name || d.metadata.name.startsWith(`${name}-`)));
    assert.equal(found.length, 1, `one ${kind} ${name ?? ''}, found ${found.length}`);
    return found[0];
  };
  return { docs, one };
}

const selects = (sel, labels) => Object.entries(sel).every(([k, v]) => labels[k] === v);

function checkServers({ docs, one }) {
  const sts = one('StatefulSet', 'softcast');
  const pod = sts.spec.template;
  const [c] = pod.spec.containers;
  const headless = one('Service', 'softcast-pods');
  assert.equal(sts.spec.serviceName, headless.metadata.name);
  assert.equal(headless.spec.clusterIP, 'None', 'the pods\' DNS names need a headless Service');
  assert.ok(selects(headless.spec.selector, pod.metadata.labels));
  // The pod's own name in its sessions' ids.
  assert.ok(c.args.includes('--process-name=$(POD_NAME)'), c.args.join(' '));
  assert.equal(c.env.find((e) => e.name === 'POD_NAME').valueFrom.fieldRef.fieldPath, 'metadata.name');
  for (const e of c.env.filter((x) => x.valueFrom?.configMapKeyRef)) {
    const ref = e.valueFrom.configMapKeyRef;
    assert.ok(one('ConfigMap', ref.name).data[ref.key] !== undefined, `${e.name}: no key ${ref.key} in ${ref.name}`);
  }
  // The lobby lists the processes in --peers: the StatefulSet's pods, all of them.
  const peers = one('ConfigMap', 'softcast-cluster').data.peers.split(',');
  assert.deepEqual(peers, Array.from({ length: sts.spec.replicas }, (_, i) => `softcast-${i}`));
  // Probes on the health endpoint, on a port the container has.
  const ports = new Set(c.ports.map((p) => p.name));
  for (const probe of [c.readinessProbe, c.livenessProbe]) {
    assert.equal(probe.httpGet.path, '/api/health');
    assert.ok(ports.has(probe.httpGet.port), `probe port ${probe.httpGet.port}`);
  }
  // The drain: out of the endpoints (preStop), then SIGTERM within the grace period.
  assert.ok(c.lifecycle.preStop.exec.command.length > 0);
  assert.ok(pod.spec.terminationGracePeriodSeconds >= 30);
  assert.ok(c.args.some((a) => a.startsWith('--state-dir=')), 'sessions kept across restarts');
  assert.ok(sts.spec.volumeClaimTemplates.some((v) => c.volumeMounts.some((m) => m.name === v.metadata.name)));
  assert.equal(pod.spec.securityContext.runAsNonRoot, true);
  assert.equal(pod.metadata.annotations['prometheus.io/scrape'], 'true');
  assert.equal(pod.metadata.annotations['prometheus.io/path'], '/metrics');
  assert.ok(c.resources.requests.cpu && c.resources.requests.memory && c.resources.limits.memory);
  const pdbs = docs.filter((d) => d.kind === 'PodDisruptionBudget' && selects(d.spec.selector.matchLabels, pod.metadata.labels));
  assert.equal(pdbs.length, 1, 'a disruption budget for the servers');
  return { c, pod };
}

function checkRouter({ one }) {
  const rules = one('ConfigMap', 'softcast-router').data;
  const dep = one('Deployment', 'softcast-router');
  const [c] = dep.spec.template.spec.containers;
  assert.ok(c.readinessProbe && c.livenessProbe);
  assert.ok(dep.spec.template.spec.volumes.some((v) => v.secret?.secretName === 'softcast-tls'), 'TLS from a Secret');
  assert.match(rules['nginx.conf'], /listen 8443 ssl;/);
  assert.match(rules['nginx.conf'], /include \/etc\/nginx\/softcast\/routes\.conf;/);
  assert.match(rules['routes.conf'], /location \/ws\/ \{[\s\S]*?proxy_pass http:\/\/\$sc_ws;/);
  assert.match(rules['routes.conf'], /location = \/api\/sessions \{[^}]*proxy_next_upstream[^;]*http_503[^;]*non_idempotent;/s);
  // The rules are the files the local cluster runs (deploy/local/ includes them from here).
  for (const f of ['maps.conf', 'routes.conf'])
    assert.equal(rules[f], fs.readFileSync(`${ROOT}deploy/k8s/base/router/${f}`, 'utf8'));
  // maps.conf reads the process off the request as the servers write their ids.
  const res = [...rules['maps.conf'].matchAll(/^\s*"~(.+?)"\s+\$1;/gm)].map((m) => new RegExp(m[1]));
  assert.equal(res.length, 3);
  const processOf = (uri) => { for (const re of res) { const m = uri.match(re); if (m) return m[1]; } return ''; };
  assert.equal(processOf('/api/sessions/softcast-12.s3-1-ab12cd34/recording'), 'softcast-12');
  assert.equal(processOf('/ws/?session=softcast-2.s0-7-deadbeef&token=00ff'), 'softcast-2');
  assert.equal(processOf('/?session=softcast-0.s63-100-0badf00d&token=00ff'), 'softcast-0');
  assert.equal(processOf('/api/sessions?process=softcast-1'), 'softcast-1');
  assert.equal(processOf('/api/sessions'), '');
  assert.equal(processOf('/?session=s3-1-ab12cd34'), '', 'an id without a process name names none');
}

test('the cpu overlay: CPU servers in a StatefulSet behind the router, no GPU asked for', () => {
  const r = render('cpu');
  const { c } = checkServers(r);
  checkRouter(r);
  assert.match(c.image, /:cpu$/);
  assert.equal(c.env.find((e) => e.name === 'SOFTCAST_BACKEND').value, 'cpu');
  assert.ok(c.args.includes('--backend=$(SOFTCAST_BACKEND)'));
  assert.equal(c.resources.requests['nvidia.com/gpu'], undefined);
});

test('the gpu overlay: one GPU a pod through the NVIDIA device plugin, the CUDA image and backend', () => {
  const r = render('gpu');
  const { c, pod } = checkServers(r);
  checkRouter(r);
  assert.match(c.image, /:cuda$/);
  assert.equal(c.env.find((e) => e.name === 'SOFTCAST_BACKEND').value, 'cuda');
  assert.equal(Number(c.resources.requests['nvidia.com/gpu']), 1);
  assert.equal(Number(c.resources.limits['nvidia.com/gpu']), 1);
  assert.ok(pod.spec.tolerations.some((t) => t.key === 'nvidia.com/gpu'));
});
