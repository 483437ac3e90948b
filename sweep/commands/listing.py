"""``mjp sweep list`` (the shipped studies and their size) and ``mjp config show`` (a resolved config).

Both read YAML and validate it with pydantic only: no torch, no timm, no Ray.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml


def _summary(text: str, width: int = 110) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1].rsplit(" ", 1)[0] + " …"


def study_size(name: str, smoke: bool) -> tuple[int, int]:
    """(trials, epochs per trial) of a shipped study at full or smoke size."""
    from sweep.study.load import load_study

    study = load_study(name, smoke=smoke, check=False)
    return study.num_trials, study.base.optim.epochs


def narrow_list(rows: list[list[str]], width: int) -> str:
    """The studies for a terminal narrower than the table: a line of sizes per study, what it
    measures wrapped between words below it."""
    import textwrap

    head = [["study", "trials x epochs", "data", "--smoke"]] + [[r[0], r[2], r[3], r[4]] for r in rows]
    widths = [max(len(h[i]) for h in head) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(head[0], widths)).rstrip()]
    for h, text in zip(head[1:], (r[1] for r in rows)):
        lines.append("  ".join(c.ljust(w) for c, w in zip(h, widths)).rstrip())
        lines += textwrap.wrap(
            text, width=max(20, width - 1), initial_indent="  ", subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
        )
    return "\n".join(lines)


def cmd_sweep_list(args: argparse.Namespace) -> int:
    from analysis.markdown import markdown_table
    from sweep.console.commands_shown import terminal_columns
    from sweep.study.load import load_study
    from sweep.study.names import STUDIES_DIR

    rows = []
    for path in sorted(STUDIES_DIR.glob("*.yaml")):
        study = load_study(path.stem, check=False)
        trials, epochs = study_size(path.stem, smoke=False)
        s_trials, s_epochs = study_size(path.stem, smoke=True)
        base = study.base
        rows.append(
            [path.stem, _summary(study.config.description), f"{trials} x {epochs} ep", base.data.name, f"{s_trials} x {s_epochs} ep"]
        )
    table = markdown_table(["study", "what it measures", "trials x epochs", "data", "--smoke"], rows)
    width = terminal_columns()
    print(table if max(map(len, table.splitlines())) <= width else narrow_list(rows, width))
    print("\nrun one: mjp sweep run <study> [--smoke]; its files: sweep/studies/<study>.yaml")
    return 0


def cmd_config_show(args: argparse.Namespace) -> int:
    """The fully resolved TrainConfig: defaults filled in, the Table 4 row expanded, seeds derived.
    For a study, ``--set`` on a key of its space picks a trial (its presets applied, as the trial
    trains); any other ``--set`` overrides every trial, as ``mjp sweep run --set`` does."""
    from trainables.config.build import load_config
    from trainables.config.overrides import parse_overrides
    from trainables.config.yaml_files import read_yaml_mapping

    target = Path(args.config)
    is_study = not target.is_file() or "objective" in read_yaml_mapping(target, "config file")
    if not is_study:
        cfg = load_config(target, args.set)
        source = str(target)
    else:
        from sweep.study.load import load_study, trial_params

        sets = parse_overrides(args.set)
        space = load_study(args.config, smoke=args.smoke, check=False).config.space
        study = load_study(args.config, smoke=args.smoke, check=False, overrides={k: v for k, v in sets.items() if k not in space})
        params = trial_params(study, {k: v for k, v in sets.items() if k in space})
        cfg = study.recipe.config(params)
        picked = ", ".join(f"{k}={v}" for k, v in params.items())
        size = " (smoke)" if args.smoke else ""
        source = f"study {study.config.name}{size}, " + (f"the trial {picked}" if params else "before sampling")
    from trainables.tracking.labels import variant_words

    print(f"# {source}: Table 4 row {' '.join(variant_words(cfg.variant))}")
    print(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, default_flow_style=None).rstrip())
    return 0
