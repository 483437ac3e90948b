"""``MJPConfig``: every switch of the method, validated; every row of the paper's Table 4 is one config.

Defaults are ours, chosen on the paper's evidence; the reference code's values are options:

=====================  ==============  ====================  =========================================
field                  our default     reference code        why
=====================  ==============  ====================  =========================================
mask_ratio             0.27            0.1                   Table 3: top-1 flat over 0.03-0.27, consistency rises to 0.27
mask_mode              per_sample      per_batch             independent masks per image (a stronger augmentation)
min_block_patches      16              8                     Algorithm 1's BlockwiseMask is BEiT's generator (min block 16)
jigsaw_prob            1.0             0.5                   the paper describes no random skipping
(jigsaw warm-up)       0 epochs        20 epochs             an engine option (``TrainConfig``), not a model one
unk_init_std           0.02            1.0 (N(0,1) table)    same init as timm's PE: no confound in the ablation
dal_weight             0.01            0.01 (then cosine)    paper Sec. 4.2; schedule in ``mjp.dal.dal_weight_at``
=====================  ==============  ====================  =========================================
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

#: Every seed of a run lies in ``[0, SEED_BOUND)``: what numpy, Ray Data and torch all take as they
#: are, so no consumer reduces a seed (configs refuse larger ones).
SEED_BOUND = 2**32

Shuffle = Literal["none", "patches", "patches_and_pixels"]
PosEmbed = Literal["standard", "none", "unk", "idx"]
DalHead = Literal["none", "pca", "linear", "mlp"]
DalSchedule = Literal["constant", "warmup_cosine"]


def _is_number_field(annotation: Any) -> bool:
    """Whether a field takes an int or a float (alone, or in an optional/union), and no bool."""
    options = typing.get_args(annotation) or (annotation,)
    return bool(set(options) & {int, float}) and bool not in options


class NoBooleanNumbers(BaseModel):
    """A model whose number fields refuse booleans: YAML reads ``yes``/``no``/``true``/``off`` as
    booleans, and pydantic would take them as 1 and 0 (``optim.epochs=yes``: one epoch)."""

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_as_number(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) and info.field_name and _is_number_field(cls.model_fields[info.field_name].annotation):
            raise ValueError("a YAML boolean (yes/no/true/false/on/off) is not a number; give a number")
        return value


class MJPConfig(NoBooleanNumbers):
    """The method's configuration (frozen; unknown fields are errors).

    shuffle: what the jigsaw moves: ``none``; ``patches`` (JP, in token space); ``patches_and_pixels``
        (SPP: selected patches are shuffled and so are the pixels inside them).
    pos_embed: what sits at a shuffled slot: ``standard`` (the slot's own PE: JP's mismatch), ``unk``
        (one shared learnable E_unk), ``idx`` (a second learnable table indexed by slot: see
        ``idx_mode``), ``none`` (no PE anywhere, Table 4 B). See ``mjp.pos_embed``.
    dal: Dense Absolute Localization head on PE rows of unshuffled positions.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    shuffle: Shuffle = "patches"
    pos_embed: PosEmbed = "unk"
    #: SPP (row C): ``masked`` (ours): the selected patches move and each gets its own pixel order;
    #: ``reference`` (the reference code, which produced the paper's row C): every patch moves and
    #: one pixel order is shared by all patches of the batch
    spp_mode: Literal["masked", "reference"] = "masked"
    #: IDX (row F): ``shuffled_slots`` (ours): E_idx replaces the PE at shuffled slots;
    #: ``reference``: E_idx is added to every slot (the reference code's, the paper's row F)
    idx_mode: Literal["shuffled_slots", "reference"] = "shuffled_slots"
    mask_ratio: float = Field(0.27, ge=0.0, le=1.0)
    mask_mode: Literal["per_sample", "per_batch"] = "per_sample"
    min_block_patches: int = Field(
        16,
        ge=1,
        description="smallest block of a mask, in patches: 16 is Algorithm 1's (BEiT's block-wise masking), 8 the "
        "reference code's; above the target count round(N * mask_ratio) blocks are at most the target, as BEiT's",
    )
    aspect_ratio: tuple[float, float] = (0.3, 1 / 0.3)
    jigsaw_prob: float = Field(1.0, ge=0.0, le=1.0)
    unk_init_std: float = Field(0.02, gt=0.0)
    dal: DalHead = "mlp"
    dal_weight: float = Field(0.01, ge=0.0)
    dal_schedule: DalSchedule = "constant"
    dal_final_weight: float = Field(0.005, ge=0.0)
    patch_size: int | None = Field(None, ge=1, description="pixel patch size for models without a patch embedding (ResNet); default 16")
    seed: int = Field(0, ge=0, lt=SEED_BOUND)

    @model_validator(mode="after")
    def _consistent(self) -> "MJPConfig":
        lo, hi = self.aspect_ratio
        if not 0 < lo <= hi:
            raise ValueError(f"aspect_ratio={self.aspect_ratio}: allowed is 0 < low <= high")
        if self.pos_embed in ("unk", "idx") and self.shuffle == "none":
            raise ValueError(
                f"pos_embed={self.pos_embed!r} marks shuffled positions, but shuffle='none' never shuffles; "
                "use shuffle='patches' or pos_embed='standard'"
            )
        if self.dal != "none" and self.pos_embed == "none":
            raise ValueError(f"dal={self.dal!r} regresses positions from the PE, but pos_embed='none' has no PE; use dal='none'")
        return self

    @property
    def pe_differs_unshuffled(self) -> bool:
        """True when even an unshuffled forward adds more than the model's own PE (E_idx in the
        reference mode is added to every slot, at training and at evaluation alike)."""
        return self.pos_embed == "idx" and self.idx_mode == "reference"

    @property
    def shuffles(self) -> bool:
        return self.shuffle != "none" and self.mask_ratio > 0 and self.jigsaw_prob > 0

    @classmethod
    def variant(cls, name: str, **overrides: object) -> "MJPConfig":
        """The config of a Table 4 row, by letter (``"J"``) or name (``"jp_unk_dal_mlp"``)."""
        key = TABLE4_NAMES.get(name.upper(), name) if len(name) == 1 else name
        if key not in TABLE4:
            allowed = ", ".join(f"{letter}={n}" for letter, n in TABLE4_NAMES.items())
            raise ValueError(f"unknown MJP variant {name!r}; allowed: {allowed}")
        return cls(**{**TABLE4[key], **overrides})


#: Table 4 of the paper, rows A-J.
TABLE4: dict[str, dict[str, object]] = {
    "baseline": dict(shuffle="none", pos_embed="standard", dal="none"),
    "no_pe": dict(shuffle="none", pos_embed="none", dal="none"),
    "spp": dict(shuffle="patches_and_pixels", pos_embed="standard", dal="none"),
    "dal_mlp": dict(shuffle="none", pos_embed="standard", dal="mlp"),
    "jp": dict(shuffle="patches", pos_embed="standard", dal="none"),
    "jp_idx": dict(shuffle="patches", pos_embed="idx", dal="none"),
    "jp_unk": dict(shuffle="patches", pos_embed="unk", dal="none"),
    "jp_unk_dal_pca": dict(shuffle="patches", pos_embed="unk", dal="pca"),
    "jp_unk_dal_linear": dict(shuffle="patches", pos_embed="unk", dal="linear"),
    "jp_unk_dal_mlp": dict(shuffle="patches", pos_embed="unk", dal="mlp"),
}
TABLE4_NAMES: dict[str, str] = dict(zip("ABCDEFGHIJ", TABLE4))
#: Table 4's own wording of each row (DeiT-S is the paper's A)
TABLE4_TITLES: dict[str, str] = dict(zip(TABLE4, (
    "baseline", "no PE", "SPP", "DAL (NLN)", "JP", "JP + IDX", "JP + UNK", "JP + UNK + DAL (PCA)", "JP + UNK + DAL (LN)", "JP + UNK + DAL (NLN)",
)))
