// bench_bullet.cpp: the peer for `softcast-bench cloth --dims WxH --peer bullet`: the same
// sheet (1 m square, WxH particles, hanging from its two top corners, gravity -z) as a
// Bullet soft body (Debian libbullet-dev 3.24), stepped with the same frame time,
// substeps and solver iterations. Linked into the bench only, when Bullet is installed.
#include <BulletSoftBody/btSoftBodyHelpers.h>
#include <BulletSoftBody/btSoftBodyRigidBodyCollisionConfiguration.h>
#include <BulletSoftBody/btSoftRigidDynamicsWorld.h>
#include <btBulletDynamicsCommon.h>
#include <time.h>

extern "C" int bench_bullet_hanging(int cols, int rows, int substeps, int iterations, int frames,
                                    double *ms_per_step, double *lowest_z);

static double now_ms()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

extern "C" int bench_bullet_hanging(int cols, int rows, int substeps, int iterations, int frames,
                                    double *ms_per_step, double *lowest_z)
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
        btVector3(0, 0.5f, 0.2f), cols, rows, 1 + 2, true);
    sheet->m_cfg.piterations = iterations; // position (link) iterations per substep
    sheet->m_cfg.kDP = 0.4f / 60.0f;        // damping, as ours (0.4 per second)
    sheet->m_materials[0]->m_kLST = 1.0f;
    sheet->generateBendingConstraints(2, sheet->m_materials[0]);
    sheet->setTotalMass((btScalar)(cols * rows));
    world.addSoftBody(sheet);
    double total = 0;
    for (int f = 0; f < frames; f++) {
        double t0 = now_ms();
        world.stepSimulation(1.0f / 60.0f, substeps, 1.0f / 60.0f / substeps);
        if (f >= 10)
            total += now_ms() - t0;
    }
    btScalar low = 1e9f;
    for (int i = 0; i < sheet->m_nodes.size(); i++)
        low = btMin(low, sheet->m_nodes[i].m_x.z());
    *ms_per_step = total / (frames - 10);
    *lowest_z = low;
    world.removeSoftBody(sheet);
    delete sheet;
    return 0;
}
