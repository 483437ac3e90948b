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
dal_pca                reference       reference             row H as the paper ran it; ``affine`` (ours) is free of the PCA's orientation
=====================  ==============  ====================  =========================================
"""

from __future__ import annotations

import typing
from typing import Any, Literal, NamedTuple

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
    booleans, and pydantic would take them as 1 and 0 (``optim.epochs=yes``: one epoch); and refuse
    ``.inf`` and ``.nan`` (``optim.base_lr: .inf`` trained to a NaN loss)."""

    model_config = ConfigDict(allow_inf_nan=False)

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
    #: the ``pca`` head (row H): ``reference`` (the reference code's: the PE rows projected on two
    #: principal directions from 5 subspace iterations, compared with (row, col) directly) or
    #: ``affine`` (ours: exact directions, then a least-squares affine map to (row, col))
    dal_pca: Literal["reference", "affine"] = "reference"
    dal_weight: float = Field(0.01, ge=0.0)
    dal_schedule: DalSchedule = "constant"
    dal_final_weight: float = Field(0.005, ge=0.0)
    patch_size: int | None = Field(None, ge=1, description="pixel patch size for models without a patch embedding (ResNet); default 16")
    seed: int = Field(0, ge=0, lt=SEED_BOUND)

    @model_validator(mode="after")
    def _consistent(self) -> MJPConfig:
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
    def variant(cls, name: str, **overrides: object) -> MJPConfig:
        """The config of a Table 4 row, by letter (``"J"``) or name (``"jp_unk_dal_mlp"``)."""
        return cls(**{**table4_row(name).switches, **overrides})


class Table4Row(NamedTuple):
    """One row of the paper's Table 4: its letter, the name this code gives it, the paper's own
    wording, and the ``MJPConfig`` switches that make it."""

    letter: str
    name: str
    title: str
    switches: dict[str, object]


#: Table 4 of the paper, rows A-J (DeiT-S is the paper's A).
TABLE4_ROWS: tuple[Table4Row, ...] = (
    Table4Row("A", "baseline", "baseline", dict(shuffle="none", pos_embed="standard", dal="none")),
    Table4Row("B", "no_pe", "no PE", dict(shuffle="none", pos_embed="none", dal="none")),
    Table4Row("C", "spp", "SPP", dict(shuffle="patches_and_pixels", pos_embed="standard", dal="none")),
    Table4Row("D", "dal_mlp", "DAL (NLN)", dict(shuffle="none", pos_embed="standard", dal="mlp")),
    Table4Row("E", "jp", "JP", dict(shuffle="patches", pos_embed="standard", dal="none")),
    Table4Row("F", "jp_idx", "JP + IDX", dict(shuffle="patches", pos_embed="idx", dal="none")),
    Table4Row("G", "jp_unk", "JP + UNK", dict(shuffle="patches", pos_embed="unk", dal="none")),
    Table4Row("H", "jp_unk_dal_pca", "JP + UNK + DAL (PCA)", dict(shuffle="patches", pos_embed="unk", dal="pca")),
    Table4Row("I", "jp_unk_dal_linear", "JP + UNK + DAL (LN)", dict(shuffle="patches", pos_embed="unk", dal="linear")),
    Table4Row("J", "jp_unk_dal_mlp", "JP + UNK + DAL (NLN)", dict(shuffle="patches", pos_embed="unk", dal="mlp")),
)
#: views of the rows: name -> switches, letter -> name
TABLE4: dict[str, dict[str, object]] = {row.name: row.switches for row in TABLE4_ROWS}
TABLE4_NAMES: dict[str, str] = {row.letter: row.name for row in TABLE4_ROWS}


def table4_row(letter_or_name: object) -> Table4Row:
    """A Table 4 row by letter (``"J"``, any case) or name (``"jp_unk_dal_mlp"``); ``ValueError``
    naming the allowed rows otherwise."""
    text = str(letter_or_name)
    for row in TABLE4_ROWS:
        if text == row.name or (len(text) == 1 and text.upper() == row.letter):
            return row
    allowed = ", ".join(f"{row.letter}={row.name}" for row in TABLE4_ROWS)
    raise ValueError(f"{text!r} is not a Table 4 row; allowed: {allowed}")
