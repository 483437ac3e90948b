import pytest
from pydantic import ValidationError

from mjp import TABLE4, TABLE4_NAMES, MJPConfig


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(dal="svm"), ["dal", "none", "pca", "linear", "mlp"]),
        (dict(mask_ratio=1.5), ["mask_ratio", "less than or equal to 1"]),
        (dict(mask_ratio=-0.1), ["mask_ratio", "greater than or equal to 0"]),
        (dict(shuffle="pixels"), ["shuffle", "patches_and_pixels"]),
        (dict(ratio=0.2), ["ratio", "Extra inputs are not permitted"]),
        (dict(shuffle="none", pos_embed="unk"), ["pos_embed='unk'", "shuffle='none'"]),
        (dict(pos_embed="none", dal="mlp"), ["dal='mlp'", "pos_embed='none'"]),
        (dict(aspect_ratio=(2.0, 1.0)), ["aspect_ratio"]),
    ],
)
def test_bad_values_name_the_field_and_what_is_allowed(kwargs, words):
    with pytest.raises(ValidationError) as err:
        MJPConfig(**kwargs)
    for word in words:
        assert word in str(err.value)


def test_table4_rows_are_all_distinct_and_named_by_letter():
    configs = {letter: MJPConfig.variant(letter) for letter in TABLE4_NAMES}
    assert len({c.model_dump_json() for c in configs.values()}) == 10
    assert configs["A"] == MJPConfig.variant("baseline")
    assert configs["J"] == MJPConfig()  # our default is the paper's full method
    assert set(TABLE4_NAMES.values()) == set(TABLE4)


def test_unknown_variant_lists_the_allowed():
    with pytest.raises(ValueError, match="'K' is not a Table 4 row; allowed: A=baseline.*J=jp_unk_dal_mlp"):
        MJPConfig.variant("K")


def test_config_is_frozen():
    with pytest.raises(ValidationError):
        MJPConfig().mask_ratio = 0.5


def test_a_table4_row_is_found_by_letter_or_name_and_carries_the_paper_s_wording():
    from mjp.config import TABLE4_ROWS, table4_row

    assert [row.letter for row in TABLE4_ROWS] == list("ABCDEFGHIJ")
    for row in TABLE4_ROWS:
        assert table4_row(row.letter) is row and table4_row(row.letter.lower()) is row and table4_row(row.name) is row
        assert MJPConfig.variant(row.letter) == MJPConfig(**row.switches)
    assert table4_row("H").title == "JP + UNK + DAL (PCA)"
    with pytest.raises(ValueError, match="'jp_unk_dal' is not a Table 4 row"):
        table4_row("jp_unk_dal")
