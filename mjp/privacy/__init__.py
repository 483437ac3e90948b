"""Gradient-inversion attacks against (MJP) ViTs and their scores (the paper's Table 5).

``april_reconstruct`` (analytic, exact where theory allows), ``invert_gradients`` (optimisation,
any model), ``image_scores`` (MSE, PSNR, SSIM, FFT-2D, LPIPS), ``attack_images`` (settings a/b/c),
``choose_attack`` (the one that applies to a model).
"""

from mjp.models.april_block import AprilBlock, use_april_block
from mjp.privacy.april import NotAttackable, april_reconstruct, april_requirements, pe_gradient_condition
from mjp.privacy.gradients import infer_label, sample_gradients
from mjp.privacy.inversion import InversionResult, invert_gradients, total_variation
from mjp.privacy.scores import LPIPS, LPIPS_MISSING, image_scores, to_unit
from mjp.privacy.settings import SETTINGS, AttackResult, attack_images, attack_units, choose_attack

__all__ = [
    "SETTINGS",
    "AprilBlock",
    "AttackResult",
    "InversionResult",
    "LPIPS",
    "LPIPS_MISSING",
    "NotAttackable",
    "april_reconstruct",
    "april_requirements",
    "pe_gradient_condition",
    "attack_images",
    "attack_units",
    "choose_attack",
    "image_scores",
    "infer_label",
    "invert_gradients",
    "sample_gradients",
    "to_unit",
    "total_variation",
    "use_april_block",
]
