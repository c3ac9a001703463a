// bench_bullet.cpp: the peer for `softcast-bench cloth --dims WxH --peer bullet`: the same
// sheet (1 m square, WxH particles of 1 kg, hanging from its two top corners, gravity -z)
// as a Bullet soft body (Debian libbullet-dev 3.24), stepped with the same frame time,
// substeps and solver iterations, and the same constraints: a link on every edge of the
// triangulation (Bullet's patch with its diagonals: the same checkerboard as ours) and a
// bending link across every interior edge between the two opposite nodes (ours; Bullet's
// generateBendingConstraints(2) would add every distance-2 pair instead, 2.7 times as
// many). Stiffness and damping come from the caller (bench_cloth.c), converted from ours.
// Linked into the bench only, when Bullet is installed.
#if SOFTCAST_HAVE_BULLET
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <BulletSoftBody/btSoftBodyRigidBodyCollisionConfiguration.h>
#include <BulletSoftBody/btSoftRigidDynamicsWorld.h>
#include <btBulletDynamicsCommon.h>
#include <time.h>

#include <algorithm>
#include <vector>

#include "bench_bullet.h"

static double now_ms(clockid_t clock)
{
    timespec t;
    clock_gettime(clock, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

// One bending link across each interior edge of the patch's faces, between the two nodes
// opposite it. Returns how many.
static int add_bending_links(btSoftBody *sb, btSoftBody::Material *mat)
{
    struct half_edge {
        int lo, hi, opp;
        bool operator<(const half_edge &o) const
        {
            return lo != o.lo ? lo < o.lo : hi != o.hi ? hi < o.hi : opp < o.opp;
        }
    };
    std::vector<half_edge> he;
    const btSoftBody::Node *n0 = &sb->m_nodes[0];
    for (int f = 0; f < sb->m_faces.size(); f++) {
        int v[3];
        for (int k = 0; k < 3; k++)
            v[k] = (int)(sb->m_faces[f].m_n[k] - n0);
        for (int k = 0; k < 3; k++) {
            int a = v[k], b = v[(k + 1) % 3];
            he.push_back({std::min(a, b), std::max(a, b), v[(k + 2) % 3]});
        }
    }
    std::sort(he.begin(), he.end());
    int added = 0;
    for (size_t i = 0; i + 1 < he.size(); i++)
        if (he[i].lo == he[i + 1].lo && he[i].hi == he[i + 1].hi) {
            sb->appendLink(he[i].opp, he[i + 1].opp, mat);
            added++;
            i++;
        }
    return added;
}

extern "C" int bench_bullet_hanging(bench_bullet_sheet *s)
{
    btSoftBodyRigidBodyCollisionConfiguration config;
    btCollisionDispatcher dispatcher(&config);
    btDbvtBroadphase broadphase;
    btSequentialImpulseConstraintSolver solver;
    btSoftRigidDynamicsWorld world(&dispatcher, &broadphase, &solver, &config);
    world.setGravity(btVector3(0, 0, -9.81f));
    btSoftBodyWorldInfo &info = world.getWorldInfo();
    info.m_gravity = btVector3(0, 0, -9.81f);
    info.m_sparsesdf.Initialize();
    // As ours: y across, z down from 1.2 m to 0.2 m; fixeds 1 + 2 = the two top corners.
    btSoftBody *sheet = btSoftBodyHelpers::CreatePatch(
        info, btVector3(0, -0.5f, 1.2f), btVector3(0, 0.5f, 1.2f), btVector3(0, -0.5f, 0.2f),
        btVector3(0, 0.5f, 0.2f), s->cols, s->rows, 1 + 2, true);
    sheet->m_cfg.piterations = s->iterations; // position (link) iterations per substep
    sheet->m_cfg.kDP = (btScalar)s->damping_kdp;
    sheet->m_materials[0]->m_kLST = (btScalar)s->stretch_klst;
    s->stretch_links = sheet->m_links.size();
    btSoftBody::Material *bend = sheet->appendMaterial();
    bend->m_kLST = (btScalar)s->bend_klst;
    s->bend_links = add_bending_links(sheet, bend);
    sheet->setTotalMass((btScalar)(s->cols * s->rows));
    world.addSoftBody(sheet);
    double total = 0, cpu = 0;
    for (int f = 0; f < s->frames; f++) {
        double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
        world.stepSimulation(1.0f / 60.0f, s->substeps, 1.0f / 60.0f / (btScalar)s->substeps);
        if (f >= 10) {
            total += now_ms(CLOCK_MONOTONIC) - t0;
            cpu += now_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        }
    }
    btScalar low = 1e9f;
    for (int i = 0; i < sheet->m_nodes.size(); i++)
        low = btMin(low, sheet->m_nodes[i].m_x.z());
    s->ms_per_step = total / (s->frames - 10);
    s->cpu_ms_per_step = cpu / (s->frames - 10);
    s->lowest_z = low;
    world.removeSoftBody(sheet);
    delete sheet;
    return 0;
}

#endif /* SOFTCAST_HAVE_BULLET */
