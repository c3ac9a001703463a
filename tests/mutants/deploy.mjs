// Mutations of what pins a session to its process behind the router (issue 13): the ids,
// the links, the router's rules, the client address, the manifests. Each names the test
// that must fail.
const server = ['$BUILD/test/softcast-server'];
const cluster = 'node --test tests/deploy/cluster.test.mjs';
const manifests = 'node --test tests/deploy/manifests.test.mjs';

export default [
  {
    name: 'the process name left out of session ids (the router cannot tell where a session is)',
    file: 'server/session.c',
    find: 'snprintf(ss->id, sizeof ss->id, "%s%ss%u-%u-%s", name, name[0] ? "." : "", ss->slot,',
    replace: 'snprintf(ss->id, sizeof ss->id, "%.0s%.0ss%u-%u-%s", name, name[0] ? "." : "", ss->slot,',
    build: server,
    test: cluster,
    caught_by: 'cluster: "through the router over TLS: ..." (no session landed on a process)',
  },
  {
    name: 'links that ignore --public-url (clients sent around the router, to the bind address)',
    file: 'server/session.c',
    find: '    if (u[0]) { /* behind a router: one host for both, WebSockets under /ws/ */',
    replace: '    if (u[0] && 0) {',
    build: server,
    test: cluster,
    caught_by: 'cluster: "through the router over TLS: ..." (WebSockets through the router)',
  },
  {
    name: 'the router reads the process off a path id only (WebSockets go to any process)',
    file: 'deploy/k8s/base/router/maps.conf',
    find: '    "~[?&]session=([a-z0-9-]+)\\.s[0-9]"    $1;\n',
    replace: '',
    build: [],
    test: `${cluster} && ${manifests}`,
    caught_by: 'cluster: "through the router over TLS: ..."; manifests: the rules read the process off the request',
  },
  {
    name: 'a full process\'s 503 not retried at the next one',
    file: 'deploy/k8s/base/router/routes.conf',
    find: '    proxy_next_upstream error timeout http_503 non_idempotent;\n    proxy_next_upstream_tries 0;',
    replace: '    proxy_next_upstream error timeout;',
    build: [],
    test: manifests,
    caught_by: 'manifests: "the cpu overlay ..." (the new-session route retries on 503)',
  },
  {
    name: 'X-Forwarded-For believed from anyone (a client picks the address its quotas count)',
    file: 'server/forwarded.c',
    find: 'parse_addr(peer, strlen(peer), &a) != 0 || list_matches(c->trusted_proxies, &a, NULL) != 1)',
    replace: 'parse_addr(peer, strlen(peer), &a) != 0)',
    build: ['$BUILD/softcast-tests'],
    test: '$BUILD/softcast-tests forwarded_for',
    caught_by: 'forwarded_for_counts_only_from_a_trusted_router',
  },
  {
    name: 'the GPU overlay without its GPU request',
    file: 'deploy/k8s/overlays/gpu/server.yaml',
    find: '            requests:\n              nvidia.com/gpu: 1\n',
    replace: '',
    build: [],
    test: manifests,
    caught_by: 'manifests: "the gpu overlay: one GPU a pod ..."',
  },
  {
    name: 'the drain hook gone (a deleted pod still taking new sessions as it stops)',
    file: 'deploy/k8s/base/server.yaml',
    find: '            preStop:\n              exec:\n                command: ["/bin/sh", "-c", "sleep 5"]\n',
    replace: '            postStart:\n              exec:\n                command: ["/bin/true"]\n',
    build: [],
    test: manifests,
    caught_by: 'manifests: both overlays (the drain: preStop, then SIGTERM)',
  },
];
