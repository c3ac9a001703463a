// bench_bullet_softbody.cpp: the peer for `softcast-bench softbody --model hybrid --peer
// bullet`: the bench's tet box as a Bullet soft body (Debian libbullet-dev 3.24), dropped onto
// a floor box, stepped with the same frame time, substeps and position iterations. Its nodes
// are our tet vertices with our masses; its links are our tet edges, each at the stiffness
// (kLST) the caller converted from our compliance for that edge's region; its tetras are
// appended too, but Bullet's solver does not constrain them (volume is kept by the links
// alone: it has no per-tet volume constraint). Linked into the bench only, when Bullet is
// installed.
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

static btSoftBody *make_body(btSoftBodyWorldInfo &info, const bench_bullet_tets *t)
{
    std::vector<btVector3> pos((size_t)t->nvert);
    std::vector<btScalar> mass((size_t)t->nvert);
    for (int i = 0; i < t->nvert; i++) {
        pos[(size_t)i] = btVector3(t->x[i * 3], t->x[i * 3 + 1], t->x[i * 3 + 2]);
        mass[(size_t)i] = t->mass[i];
    }
    btSoftBody *sb = new btSoftBody(&info, t->nvert, pos.data(), mass.data());
    btSoftBody::Material *mat[4];
    mat[0] = sb->m_materials[0];
    for (int r = 1; r < 4; r++)
        mat[r] = sb->appendMaterial();
    for (int r = 0; r < 4; r++)
        mat[r]->m_kLST = (btScalar)t->klst[r];
    for (int e = 0; e < t->nedge; e++)
        sb->appendLink(t->edge[e * 2], t->edge[e * 2 + 1], mat[t->eregion[e]]);
    for (int k = 0; k < t->ntet; k++)
        sb->appendTetra(t->tet[k * 4], t->tet[k * 4 + 1], t->tet[k * 4 + 2], t->tet[k * 4 + 3]);
    sb->m_cfg.piterations = t->iterations;
    sb->m_cfg.kDP = (btScalar)t->damping_kdp;
    sb->m_cfg.kDF = 0.5f; // friction, as ours
    sb->getCollisionShape()->setMargin(0.001f);
    return sb;
}

extern "C" int bench_bullet_tet_box(bench_bullet_tets *t)
{
    btSoftBodyRigidBodyCollisionConfiguration config;
    btCollisionDispatcher dispatcher(&config);
    btDbvtBroadphase broadphase;
    btSequentialImpulseConstraintSolver solver;
    btSoftRigidDynamicsWorld world(&dispatcher, &broadphase, &solver, &config);
    btVector3 g(0, 0, (btScalar)-t->gravity);
    world.setGravity(g);
    btSoftBodyWorldInfo &info = world.getWorldInfo();
    info.m_gravity = g;
    info.m_sparsesdf.Initialize();
    btBoxShape floor_shape(btVector3(10, 10, 0.5f));
    btDefaultMotionState floor_motion(btTransform(btQuaternion::getIdentity(), btVector3(0, 0, -0.5f)));
    btRigidBody floor_body(btRigidBody::btRigidBodyConstructionInfo(0, &floor_motion, &floor_shape));
    world.addRigidBody(&floor_body);
    btSoftBody *sb = make_body(info, t);
    t->links = sb->m_links.size();
    world.addSoftBody(sb);
    std::vector<double> ms;
    double cpu = 0;
    for (int f = 0; f < t->frames; f++) {
        double t0 = now_ms(CLOCK_MONOTONIC), c0 = now_ms(CLOCK_THREAD_CPUTIME_ID);
        world.stepSimulation(1.0f / 60.0f, t->substeps, 1.0f / 60.0f / (btScalar)t->substeps);
        if (f >= 10) {
            ms.push_back(now_ms(CLOCK_MONOTONIC) - t0);
            cpu += now_ms(CLOCK_THREAD_CPUTIME_ID) - c0;
        }
    }
    std::sort(ms.begin(), ms.end());
    t->ms_median = ms[ms.size() / 2];
    t->ms_p90 = ms[ms.size() * 9 / 10];
    t->cpu_ms_mean = cpu / (double)ms.size();
    btScalar low = 1e9f;
    for (int i = 0; i < sb->m_nodes.size(); i++)
        low = btMin(low, sb->m_nodes[i].m_x.z());
    t->lowest_z = low;
    world.removeSoftBody(sb);
    delete sb;
    world.removeRigidBody(&floor_body);
    return 0;
}

#endif /* SOFTCAST_HAVE_BULLET */
