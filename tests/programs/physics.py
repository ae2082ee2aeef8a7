"""Physics and ODE programs: explicit integrators written with Python loops
and indexing, springs, N-body forces from broadcast pairwise distances, PDE
stencils with slicing, np.roll, np.diff and np.gradient."""
import numpy as np

from . import program, rng


@program(args=lambda: (np.array([1.0, 0.0]), np.array([0.5, 0.1])))
def euler_damped_oscillator(x0, params):
    k, c = params
    x = x0
    dt = 0.05
    for _ in range(40):
        dx = np.array([0.0, 0.0]) + np.stack([x[1], -k * x[0] - c * x[1]])
        x = x + dt * dx
    return x[0] ** 2 + 0.5 * x[1] ** 2


def _lotka(y, p):
    a, b, c, d = p
    return np.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])


@program(args=lambda: (np.array([1.0, 0.5, 0.8, 0.6]), np.array([1.0, 0.5])))
def rk4_lotka_volterra(p, y0):
    y = y0
    h = 0.1
    traj = [y]
    for _ in range(20):
        k1 = _lotka(y, p)
        k2 = _lotka(y + h / 2 * k1, p)
        k3 = _lotka(y + h / 2 * k2, p)
        k4 = _lotka(y + h * k3, p)
        y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        traj.append(y)
    traj = np.stack(traj)
    return np.sum((traj[:, 0] - 1.0) ** 2)


@program(args=lambda: (np.array([1.2, 0.3]),))
def rk4_preallocated_trajectory(theta):
    g_over_l, damping = theta
    n, h = 30, 0.05
    ts = np.zeros(n)
    loss = 0.0
    state = np.array([0.5, 0.0])
    for i in range(n):
        f = lambda s: np.stack([s[1], -g_over_l * np.sin(s[0]) - damping * s[1]])
        k1 = f(state); k2 = f(state + h * k1 / 2); k3 = f(state + h * k2 / 2); k4 = f(state + h * k3)
        state = state + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
        ts[i] = i * h
        loss += state[0] ** 2 * ts[i]
    return loss


@program(args=lambda: (np.array([1.2, 0.3]),))
def euler_writes_into_buffer(theta):
    traj = np.zeros((25, 2))
    s = np.array([0.5, 0.0])
    for i in range(25):
        s = s + 0.05 * np.stack([s[1], -theta[0] * np.sin(s[0]) - theta[1] * s[1]])
        traj[i] = s
    return np.sum(traj ** 2)


@program(args=lambda: (rng(200).standard_normal((5, 2)) * 0.1 + np.stack([np.arange(5.0), np.zeros(5)], 1),))
def spring_chain_energy(pos):
    d = np.diff(pos, axis=0)
    length = np.sqrt(np.sum(d ** 2, axis=1))
    return 0.5 * 10.0 * np.sum((length - 1.0) ** 2) + 9.8 * np.sum(pos[:, 1])


@program(args=lambda: (rng(201).standard_normal((5, 2)) * 0.1 + np.stack([np.arange(5.0), np.zeros(5)], 1),))
def spring_chain_linalg_norm(pos):
    length = np.linalg.norm(pos[1:] - pos[:-1], axis=1)
    return np.sum((length - 1.0) ** 2)


@program(args=lambda: (rng(202).standard_normal((6, 3)), np.linspace(1, 2, 6)), argnums=(0,))
def nbody_potential_broadcast(pos, mass):
    diff = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt(np.sum(diff ** 2, axis=-1) + np.eye(len(pos)))
    pot = -mass[:, None] * mass[None, :] / r
    return 0.5 * np.sum(pot * (1 - np.eye(len(pos))))


@program(args=lambda: (rng(203).standard_normal((5, 2)) * 2,))
def lennard_jones_triu(pos):
    n = len(pos)
    i, j = np.triu_indices(n, k=1)
    r = np.linalg.norm(pos[i] - pos[j], axis=1)
    sr6 = (1.0 / r) ** 6
    return np.sum(4 * (sr6 ** 2 - sr6))


@program(args=lambda: (rng(204).standard_normal((4, 2)), rng(205).standard_normal((4, 2)) * 0.1))
def nbody_leapfrog_integration(x0, v0):
    x, v = x0, v0
    dt = 0.01
    for _ in range(10):
        diff = x[None, :, :] - x[:, None, :]
        dist3 = (np.sum(diff ** 2, axis=-1) + 0.1) ** 1.5
        acc = np.sum(diff / dist3[..., None], axis=1)
        v = v + dt * acc
        x = x + dt * v
    return np.sum(x[:, 0])


@program(args=lambda: (np.array([0.2]),))
def heat_equation_slicing(alpha):
    u = np.sin(np.linspace(0, np.pi, 12))
    for _ in range(15):
        lap = np.concatenate([[0.0], u[2:] - 2 * u[1:-1] + u[:-2], [0.0]])
        u = u + alpha[0] * lap
    return np.sum(u ** 2)


@program(args=lambda: (np.sin(np.linspace(0, 2 * np.pi, 16, endpoint=False)),))
def wave_periodic_roll(u0):
    u_prev, u = u0, u0
    c2 = 0.3
    for _ in range(10):
        u_next = 2 * u - u_prev + c2 * (np.roll(u, 1) + np.roll(u, -1) - 2 * u)
        u_prev, u = u, u_next
    return np.sum(u ** 2) + u[3]


@program(args=lambda: (np.sin(np.linspace(0, 3, 10)) + 0.1 * rng(206).standard_normal(10),))
def smoothness_np_diff(y):
    return np.sum(np.diff(y) ** 2) + 0.1 * np.sum(np.diff(y, n=2) ** 2)


@program(args=lambda: (np.linspace(0, 2, 9) ** 2 + 0.1 * rng(207).standard_normal(9),))
def np_gradient_velocity(x):
    v = np.gradient(x, 0.25)
    return np.sum(v ** 2)


@program(args=lambda: (rng(208).standard_normal((4, 3)), rng(209).standard_normal((4, 3))))
def torque_cross_product(r, F):
    tau = np.cross(r, F)
    return np.sum(tau ** 2) + np.sum(np.cross(r[0], F[1]))


@program(args=lambda: (np.array([10.0, 0.7]),))
def projectile_range(params):
    v0, angle = params
    vx, vy = v0 * np.cos(angle), v0 * np.sin(angle)
    x, y = 0.0, 0.0
    dt = 0.05
    drag = 0.05
    for _ in range(30):
        speed = np.sqrt(vx ** 2 + vy ** 2)
        vx = vx - drag * speed * vx * dt
        vy = vy - (9.81 + drag * speed * vy) * dt
        x = x + vx * dt
        y = y + vy * dt
    return (x - 8.0) ** 2 + y ** 2


@program(args=lambda: (np.linspace(0, 1, 11) ** 2,))
def trapezoid_work_integral(force):
    xs = np.linspace(0, 1, 11)
    return np.trapezoid(force * np.sin(xs), xs) ** 2


@program(args=lambda: (np.linspace(0, 1, 11) ** 2,))
def trapezoid_by_hand(force):
    xs = np.linspace(0, 1, 11)
    dx = np.diff(xs)
    return np.sum(0.5 * (force[1:] + force[:-1]) * dx) ** 2


@program(args=lambda: (rng(210).standard_normal((3, 3)) * 0.3 + np.eye(3),))
def rigid_body_rotation_energy(R):
    inertia = np.diag([1.0, 2.0, 3.0])
    omega = np.array([0.1, 0.2, 0.3])
    I_world = R @ inertia @ R.T
    ortho = R.T @ R - np.eye(3)
    return 0.5 * omega @ I_world @ omega + np.sum(ortho ** 2)


@program(args=lambda: (rng(211).uniform(-1, 1, (5, 2)), np.array([1.0, -1.0, 2.0, 0.5, -0.5])), argnums=(0,))
def electrostatic_potential_grid(charges_pos, q):
    gx, gy = np.meshgrid(np.linspace(-2, 2, 4), np.linspace(-2, 2, 4))
    grid = np.stack([gx.ravel(), gy.ravel()], axis=1)
    r = np.linalg.norm(grid[:, None, :] - charges_pos[None, :, :] + 0.01, axis=-1)
    phi = np.sum(q / r, axis=1)
    return np.sum(phi ** 2)


@program(args=lambda: (np.array([2.0, 0.5]),))
def meshgrid_traced_field(k):
    x = np.linspace(0, 1, 5)
    X, Y = np.meshgrid(x * k[0], x * k[1])
    return np.sum(np.sin(X) * np.cos(Y))


@program(args=lambda: (rng(212).standard_normal(6),))
def cumulative_displacement(v):
    x = np.cumsum(v * 0.1)
    return np.sum(x ** 2) + np.cumprod(1 + 0.1 * v)[-1]


@program(args=lambda: (np.array([0.8]),))
def logistic_map_orbit(r):
    x = 0.3
    total = 0.0
    for _ in range(15):
        x = 3.5 * r[0] * x * (1 - x)
        total += x
    return total


@program(args=lambda: (rng(213).standard_normal((4, 2)),))
def rbf_energy_sqrt_pairwise_with_diagonal(pos):
    diff = pos[:, None, :] - pos[None, :, :]
    r = np.sqrt(np.sum(diff ** 2, axis=-1))          # r[i, i] == 0 exactly
    return np.sum(np.exp(-r))


@program(args=lambda: (np.array([1.0, 2.0, 3.0, 2.0, 0.5, 1.5]),))
def amplitude_spectrum_of_zero_mean_signal(x):
    X = np.fft.rfft(x - np.mean(x))                  # the DC bin is exactly 0
    return np.sum(np.abs(X))
