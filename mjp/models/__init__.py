"""MJP model families on timm: ViT (deit_*, vit_*), Swin (with an added absolute PE), ResNet (shuffle only)."""

from mjp.models.base import MJPMixin, MJPOutput
from mjp.models.factory import create_model

__all__ = ["MJPMixin", "MJPOutput", "create_model"]
