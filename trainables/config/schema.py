"""The ``TrainConfig`` schema: one pydantic section per part of a run (model, data, optim, mjp, eval,
scaling, runtime, tracking), strict (an unknown key is an error), with the checks that need two
keys at once and the seed streams a run derives from ``runtime.seed``."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from mjp.config import SEED_BOUND, TABLE4, MJPConfig, NoBooleanNumbers, table4_row
from mjp.keys import CONSISTENCY_RATIO, CORRUPTIONS, PE_EV_DIMS, SHUFFLE_EVAL_RATIOS
from trainables.config.overrides import did_you_mean
from trainables.config.seeds import derive_seed

DatasetName = Literal["digits", "fashion_mnist", "imagefolder", "cifar10", "cifar100"]


class _Section(NoBooleanNumbers):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSection(_Section):
    name: str = "vit_tiny_patch16_224"
    #: a first block that APRIL's analytic attack can invert exactly (``mjp.privacy``)
    april_block: bool = False
    #: passed to ``timm.create_model`` (img_size, patch_size, embed_dim, depth, drop_path_rate, ...)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    #: a local timm checkpoint (``pretrained_cfg_overlay=dict(file=...)``); nothing downloads
    pretrained_file: str | None = None


def custom_resources(v: dict[str, float], key: str, why: str) -> dict[str, float]:
    """``v`` unless it names a resource Ray manages itself or a non-positive amount (ValueError naming it)."""
    bad = [k for k, amount in v.items() if k in {"CPU", "GPU", "memory", "object_store_memory"} or amount <= 0]
    if bad:
        raise ValueError(f"{bad[0]!r}: {key} takes custom resources with positive amounts ({why})")
    return v


class DataSection(_Section):
    name: DatasetName = "digits"
    root: str | None = Field(None, description="dataset directory (fashion_mnist, imagefolder, cifar*)")
    download: bool = Field(False, description="cifar only: let torchvision download it")
    img_size: int | None = Field(None, ge=8, description="resize target for imagefolder/cifar (default 224 / 32)")
    augment: Literal["none", "small", "deit"] = "small"
    batch_size: int = Field(64, ge=1, description="per worker")
    loader_workers: int = Field(0, ge=0)
    repeated_aug: int = Field(1, ge=1, description="repeats per sample (DeiT's repeated augmentation: 3)")
    train_limit: int | None = Field(None, ge=1, description="use only the first N training images")
    val_limit: int | None = Field(None, ge=1, description="use only the first N validation images")
    seed: int | None = Field(None, ge=0, lt=SEED_BOUND, description="sample order; default: derived from runtime.seed")
    on_bad_image: Literal["fail", "skip"] = Field(
        "fail", description="imagefolder: an unreadable image fails the run, or is skipped and counted"
    )
    #: ``torch``: a DataLoader per worker (decoding on that worker's node); ``ray_data``: the
    #: training split decoded and augmented by Ray Data tasks on any CPU node (imagefolder only)
    loader: Literal["torch", "ray_data"] = "torch"
    #: ``cpu``: the loader's workers decode (PIL) and augment (timm); ``gpu``: they only read the
    #: files, and the training device decodes (nvJPEG) and augments the batch (imagefolder, torch loader)
    decode: Literal["cpu", "gpu"] = "cpu"
    #: ``ray_data`` only: custom Ray resources each read + decode task asks for besides its CPU, e.g.
    #: ``{mjp_data: 1}`` to keep decoding on the nodes that declare it (cluster.yaml's CPU-only nodes)
    ray_data_resources: dict[str, float] = Field(default_factory=dict)

    @field_validator("ray_data_resources")
    @classmethod
    def _custom_resources_only(cls, v: dict[str, float]) -> dict[str, float]:
        return custom_resources(v, "ray_data_resources", "a task's CPU is Ray Data's own")

    def __hash__(self) -> int:  # frozen, with one dict field: Ray Data's tasks cache their transform by section
        return hash(tuple(tuple(sorted(v.items())) if isinstance(v, dict) else v for v in self.__dict__.values()))


class OptimSection(_Section):
    epochs: int = Field(10, ge=1, le=10_000, description="at most 10,000: the paper trains 300; more is a typo, not a study")
    base_lr: float = Field(5e-4, gt=0, description="lr = base_lr * global_batch / lr_batch_ref (DeiT)")
    lr_batch_ref: int = Field(512, ge=1)
    min_lr: float = Field(1e-5, ge=0)
    weight_decay: float = Field(0.05, ge=0)
    warmup_epochs: float = Field(0.0, ge=0)
    clip_grad: float | None = Field(5.0, gt=0)
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    mixup: float = Field(0.0, ge=0, description="mixup alpha (DeiT: 0.8)")
    cutmix: float = Field(0.0, ge=0, description="cutmix alpha (DeiT: 1.0)")
    jigsaw_warmup_epochs: int = Field(0, ge=0, description="reference code: no jigsaw during the first 20 epochs")
    dal_warmup_epochs: float = Field(0.0, ge=0, description="for mjp.dal_schedule=warmup_cosine")


class PrivacySection(_Section):
    """Gradient-inversion attacks at the end of training (Table 5), on the first ``images`` val images."""

    settings: tuple[Literal["a", "b", "c"], ...] = ("a", "b", "c")
    attack: Literal["april", "inversion"] = "april"
    images: int = Field(4, ge=1)
    ratio: float = Field(0.5, ge=0, le=1, description="shuffle ratio of x~ in settings b and c")
    inversion_steps: int = Field(200, ge=1)
    lpips_backbone: str | None = Field(None, description="torchvision AlexNet state dict; without it LPIPS is absent")
    client_dtype: Literal["float32", "float64"] = Field("float32", description="precision of the simulated client's gradients")


class RobustnessSection(_Section):
    """Robustness at the end of training (Table 2, supplementary Table 4)."""

    #: ImageNet-C corruptions made on the fly from the validation images (5 severities each)
    corruptions: tuple[str, ...] = CORRUPTIONS
    images: int | None = Field(1000, ge=1, description="the first N validation images are corrupted (None: all)")
    workers: int | None = Field(None, ge=1, description="processes making corruptions (default: the worker's CPUs)")
    imagenet_c_root: str | None = Field(None, description="a pre-made ImageNet-C: <root>/<corruption>/<severity>/<class>/*.JPEG")
    imagenet_a_root: str | None = Field(None, description="ImageNet-A: <root>/<wnid>/*.jpg (200 classes)")
    imagenet_o_root: str | None = Field(None, description="ImageNet-O: <root>/<wnid>/*.jpg, against data.root/val's images of its classes")
    imagenet_r_root: str | None = Field(None, description="ImageNet-R: <root>/<wnid>/*.jpg (200 classes)")

    @field_validator("corruptions")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [c for c in v if c not in CORRUPTIONS]
        if unknown:
            raise ValueError(f"unknown corruptions {unknown}{did_you_mean(unknown[0], CORRUPTIONS)}; allowed: {', '.join(CORRUPTIONS)}")
        return v


class PEAnalysisSection(_Section):
    """What the position embedding learnt, at the end of training (Table 6, supplementary Table 2, Fig. 1/4/7/8)."""

    dims: tuple[int, ...] = PE_EV_DIMS
    folds: int = Field(5, ge=2, description="cross-validation folds of the position regression")
    umap: bool = Field(True, description="the 2-D UMAP projection (numba compiles on first use: seconds)")
    attention_images: int = Field(4, ge=0, description="validation images whose last-layer CLS attention is drawn")


class EvalSection(_Section):
    consistency_ratio: float = Field(CONSISTENCY_RATIO, ge=0, le=1)
    privacy: PrivacySection | None = None
    robustness: RobustnessSection | None = None
    pe_analysis: PEAnalysisSection | None = None
    shuffle_ratios: tuple[float, ...] = SHUFFLE_EVAL_RATIOS
    seed: int | None = Field(
        None, ge=0, lt=SEED_BOUND, description="test-time shuffles, attacks, corruptions; default: derived from runtime.seed"
    )

    @field_validator("shuffle_ratios")
    @classmethod
    def _ratios_in_range(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        bad = [r for r in v if not 0 <= r <= 1]
        if bad:
            raise ValueError(f"ratios {bad} are outside [0, 1]")
        return v


class ScalingSection(_Section):
    num_workers: int = Field(1, ge=1, description="data-parallel workers")
    #: ``auto``: one worker trains in the trial's own process, several through Ray Train's
    #: TorchTrainer; ``ray_train``: always through TorchTrainer (its worker group and controller)
    trainer: Literal["auto", "ray_train"] = "auto"
    use_gpu: bool = False
    cpus_per_worker: float = Field(1.0, gt=0)
    gpus_per_worker: float = Field(1.0, ge=0)
    #: custom Ray resources each training worker asks for besides CPU/GPU, e.g. ``{mjp_gpu: 1}``:
    #: the local cluster twin's stand-in for a GPU (``mjp cluster up --local``)
    worker_resources: dict[str, float] = Field(default_factory=dict)
    #: how Ray Train places several workers: ``STRICT_SPREAD`` puts each on its own node
    placement: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"

    @field_validator("worker_resources")
    @classmethod
    def _custom_resources_only(cls, v: dict[str, float]) -> dict[str, float]:
        return custom_resources(v, "worker_resources", "CPU and GPU are cpus_per_worker / gpus_per_worker")

    @property
    def in_process(self) -> bool:
        """Whether the training runs in the trial's own process (no Ray Train worker group)."""
        return self.num_workers == 1 and self.trainer == "auto"


class RuntimeSection(_Section):
    seed: int = Field(0, ge=0, lt=SEED_BOUND, description="drives every random stream of the run (trainables/config/seeds.py)")
    amp: Literal["none", "bf16", "fp16"] = "none"
    channels_last: bool = False
    compile: bool = Field(
        False, description="torch.compile the model, and with data.decode=gpu the batch augmentation after the crop (one region)"
    )
    log_every: int = Field(50, ge=1, description="steps between host syncs for the running loss")
    checkpoint_every: int = Field(10, ge=1, description="epochs between checkpoints (also at the last epoch)")
    checkpoint_minutes: float = Field(
        15.0,
        gt=0,
        description="also checkpoint at the end of any epoch that ends this long after the last checkpoint (long epochs lose at most one)",
    )
    max_failures: int = Field(
        2, ge=0, description="restarts from the last checkpoint after a lost worker or node (an error in the input is not retried)"
    )
    fail_after_epoch: int | None = Field(None, ge=1, description="testing: raise once after this epoch's report")


class TrackingSection(_Section):
    experiment: str = Field("mjp", min_length=1)
    uri: str | None = Field(None, description="MLflow tracking URI; default $MLFLOW_TRACKING_URI or ./mlflow.db")
    run_name: str | None = None
    log_checkpoint: bool = True
    storage_path: str | None = Field(
        None, description="Ray results (checkpoints, logs); default $MJP_SWEEP_STORAGE (set on a cluster: cluster.yaml) or ./runs"
    )
    system_metrics_s: float | None = Field(
        10.0,
        gt=0,
        description="seconds between MLflow's system metrics (CPU, memory, disk, network; GPU with pynvml) on a training's run; null: off",
    )


#: (section, field, stream): the seeds derived from ``runtime.seed`` unless given
_DERIVED_SEEDS = (("mjp", "seed", "jigsaw"), ("eval", "seed", "eval"), ("data", "seed", "data"))


class TrainConfig(_Section):
    """A complete training run: model, data, recipe, MJP, evaluation, scaling, tracking."""

    model: ModelSection = ModelSection()
    data: DataSection = DataSection()
    optim: OptimSection = OptimSection()
    mjp: MJPConfig = MJPConfig()
    eval: EvalSection = EvalSection()
    scaling: ScalingSection = ScalingSection()
    runtime: RuntimeSection = RuntimeSection()
    tracking: TrackingSection = TrackingSection()

    #: data loader processes per CPU a training worker reserves: more only contend (and each holds
    #: a copy of the dataset's state: 512 on this 24 GB machine took all its memory)
    LOADER_WORKERS_PER_CPU: ClassVar[int] = 4

    @model_validator(mode="after")
    def _loader_workers_fit(self) -> TrainConfig:
        most = max(1, int(self.LOADER_WORKERS_PER_CPU * self.scaling.cpus_per_worker))
        if self.data.loader_workers > most:
            raise ValueError(
                f"data.loader_workers={self.data.loader_workers} is more than {self.LOADER_WORKERS_PER_CPU} per CPU a worker "
                f"reserves (scaling.cpus_per_worker={self.scaling.cpus_per_worker:g}): allowed 0-{most}; raise "
                "scaling.cpus_per_worker to load with more"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _expand(cls, data: Any) -> Any:
        """``mjp: {variant: J, mask_ratio: 0.1}`` = Table 4 row J with one override; seeds not
        given are derived from ``runtime.seed``."""
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("mjp"), dict) and "variant" in data["mjp"]:
            mjp = dict(data["mjp"])
            data = {**data, "mjp": {**table4_switches(mjp.pop("variant")), **mjp}}
        runtime = data.get("runtime") if isinstance(data.get("runtime"), dict) else {}
        seed = runtime.get("seed", 0)
        if isinstance(seed, int) and not isinstance(seed, bool):
            for section, field, stream in _DERIVED_SEEDS:
                part = data.get(section, {})
                if isinstance(part, dict) and part.get(field) is None:
                    data = {**data, section: {**part, field: derive_seed(seed, stream)}}
        return data

    def warnings(self) -> list[str]:
        """What this config allows but probably does not mean (one line each, naming the keys)."""
        found = []
        if self.optim.warmup_epochs > self.optim.epochs:
            found.append(
                f"optim.warmup_epochs={self.optim.warmup_epochs:g} is longer than optim.epochs={self.optim.epochs}: "
                f"the learning rate never reaches optim.base_lr; set optim.warmup_epochs to at most {self.optim.epochs}"
            )
        if self.data.ray_data_resources and self.data.loader != "ray_data":
            found.append(
                f"data.ray_data_resources={self.data.ray_data_resources} does nothing with data.loader={self.data.loader}: "
                "it places Ray Data's decode tasks (data.loader=ray_data)"
            )
        return found

    @property
    def variant(self) -> str:
        """The Table 4 row this config's MJP switches match (``custom`` when none does)."""
        for name, row in TABLE4.items():
            if all(getattr(self.mjp, k) == v for k, v in row.items()):
                return name
        return "custom"


def table4_switches(name: object) -> dict[str, object]:
    """The MJP switches of a Table 4 row by letter or name; ``ValueError`` with the closest name."""
    try:
        return table4_row(name).switches
    except ValueError as err:
        raise ValueError(f"mjp.variant={err}".replace("; allowed", f"{did_you_mean(str(name), TABLE4)}; allowed", 1)) from None
