"""Forward mode on the program battery: ``tp.jvp`` of every program along a
random direction against the float64 central difference
(tests/programs/runner.py, ``classify_forward``).  Programs listed in
test_user_programs.py's tables are judged there; forward mode must not be
wrong or crash where reverse mode is right, and a forward-only refusal is
listed here, with the same "now correct" tightening."""
import pytest

from programs import load
from programs.runner import CORRECT, REFUSED, classify_forward
from test_user_programs import EXPECTED_BROKEN, EXPECTED_REFUSED, REFUSED_BY_DESIGN

PROGRAMS = load()

#: Reverse mode differentiates these; forward mode refuses complex values by
#: name (core/forward.py ``_refuse_complex``), so jvp, jacfwd and
#: tp.hessian (forward over reverse) of programs with complex intermediates
#: are refused.
FORWARD_REFUSES_COMPLEX = frozenset("""
    amplitude_spectrum_of_zero_mean_signal eigvals_nonsymmetric_spectral_radius
    fft_circular_convolution rfft_power_spectrum_lowpass rfft_irfft_smoothing fft2_image_highpass
    phasor_sum_magnitude abs_of_complex_product abs_squared_of_imaginary real_imag_of_complex
    angle_of_complex dft_matrix_by_hand complex_matmul_unitary_loss fft_frequency_weighted_loss
    fft_axis0_zero_padded rfft_truncated_norm_forward irfft_odd_length_roundtrip
    rfft2_irfft2_image_filter fftn_ifftn_axes_ortho fft_cross_correlation_lag spectrogram_frames_rfft
    fft_of_real_then_ifft_real_part complex_division_log_sqrt complex_linear_solve
    complex_vdot_norm_einsum complex_from_0d_angle astype_complex_then_abs eigvals_complex_pair
    float32_fft_diff_interp complex_from_unpacked_params damped_complex_exponential
    hessian_through_fft unwrap_phase_of_rotating_phasor
""".split())


@pytest.fixture(scope="module")
def outcomes():
    return {name: classify_forward(prog) for name, prog in PROGRAMS.items()}


def _verdict(name, o):
    detail = o.reason + (f" [{o.where}]" if o.where else "")
    if name in FORWARD_REFUSES_COMPLEX:
        if o.status == CORRECT:
            return "now correct in forward mode: remove it from FORWARD_REFUSES_COMPLEX"
        return "" if o.status == REFUSED else f"{o.status}: {detail}"
    if name in EXPECTED_BROKEN:
        return ""                                  # diagnosed with reverse mode
    if name in EXPECTED_REFUSED or name in REFUSED_BY_DESIGN:
        return "" if o.status in (REFUSED, CORRECT) else f"{o.status}: {detail}"
    return "" if o.status == CORRECT else f"{o.status}: {detail}"


def test_forward_table_names_existing_programs():
    assert sorted(FORWARD_REFUSES_COMPLEX - set(PROGRAMS)) == []


def test_forward_mode_on_the_battery(outcomes):
    bad = [f"{n}: {v}" for n, o in sorted(outcomes.items()) if (v := _verdict(n, o))]
    assert not bad, f"{len(bad)} program(s) off their expected forward outcome:\n" + "\n".join(bad)
