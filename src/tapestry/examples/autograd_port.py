"""A program written for HIPS autograd, run by tapestry: the port is the
import lines (the only lines that name tapestry; each shows autograd's).

It fits a Gaussian process's kernel hyperparameters to a few noisy series
by maximizing the summed log marginal likelihood, in autograd's style:
a ``+=`` accumulator over the series, ``np.linalg`` through the namespace,
``np.array`` of traced values, and ``misc.optimizers.adam`` with a
callback.  Run: ``python -m tapestry.examples.autograd_port``.
"""
import tapestry.autograd.numpy as np  # autograd: import autograd.numpy as np
import tapestry.autograd.numpy.random as npr  # autograd: import autograd.numpy.random as npr
from tapestry.autograd import value_and_grad  # autograd: from autograd import value_and_grad
from tapestry.autograd.misc.optimizers import adam  # autograd: from autograd.misc.optimizers import adam
from tapestry.autograd.scipy.stats import norm  # autograd: from autograd.scipy.stats import norm


def rbf_covariance(params, x, xp):
    """Squared-exponential kernel with a learned amplitude and length scale."""
    amplitude = np.exp(params["log_amp"])
    lengthscale = np.exp(params["log_len"])
    diffs = (x[:, None] - xp[None, :]) / lengthscale
    return amplitude * np.exp(-0.5 * diffs ** 2)


def log_marginal_likelihood(params, x, y):
    """log N(y | mean, K + noise I), with np.linalg's slogdet and solve."""
    noise = np.exp(params["log_noise"]) + 1e-6
    cov = rbf_covariance(params, x, x) + noise * np.eye(len(x))
    resid = y - params["mean"]
    sign, logdet = np.linalg.slogdet(cov)
    alpha = np.linalg.solve(cov, resid)
    return -0.5 * (np.dot(resid, alpha) + logdet + len(x) * np.log(2 * np.pi))


def log_prior(params):
    """Weak normal priors on the log-hyperparameters, stacked with np.array."""
    logs = np.array([params["log_amp"], params["log_len"], params["log_noise"]])
    return np.sum(norm.logpdf(logs, 0.0, 2.0))


def make_objective(series):
    def objective(params, iter):
        total = log_prior(params)
        for x, y in series:
            total += log_marginal_likelihood(params, x, y)
        return -total / len(series)
    return objective


def make_data(num_series=4, num_points=25, seed=0):
    """Samples of sin(3x) plus noise at random inputs, one list per series."""
    rs = npr.RandomState(seed)
    series = []
    for _ in range(num_series):
        x = np.sort(rs.uniform(-2.0, 2.0, num_points))
        y = np.sin(3.0 * x) + 0.1 * rs.randn(num_points) + 0.3
        series.append((x, y))
    return series


def main(num_iters=150, quiet=False):
    """Train; return the objective's first and last values."""
    objective = make_objective(make_data())
    objective_and_grad = value_and_grad(objective)
    init = {"log_amp": 0.0, "log_len": 0.0, "log_noise": -1.0, "mean": 0.0}
    history = []

    def grad_only(params, iter):
        value, g = objective_and_grad(params, iter)
        history.append(value)
        return g

    def callback(params, iter, gradient):
        if not quiet and iter % 25 == 0:
            print(f"iter {iter:4d}  -log evidence {history[-1]:.4f}  "
                  f"length scale {np.exp(params['log_len']):.3f}")

    params = adam(grad_only, init, callback=callback, num_iters=num_iters, step_size=0.05)
    final = objective(params, num_iters)
    if not quiet:
        print(f"final -log evidence {final:.4f}  noise std "
              f"{np.sqrt(np.exp(params['log_noise'])):.3f}")
    return history[0], final, params


if __name__ == "__main__":
    main()
