"""The damage matrix of test_store_damage.py for the stores kept in one file (bm25, hipporag,
hindsight, sliding_window, and the keyword plugin's JSON): a module of its own, so `--dist
loadscope` runs it beside the other half (the stores with a FAISS snapshot) on another worker."""

from __future__ import annotations

import pytest
import test_store_damage as damage

pristine = damage.pristine  # the fixture (module-scoped: this module builds its own pristine stores)
CASES = damage.cases([name for name, files in damage.STORE_FILES.items() if len(files) == 1])


@pytest.mark.parametrize("name,file,how", CASES, ids=["-".join(c) for c in CASES])
def test_a_damaged_store_file_is_read_right_or_one_error_naming_it(pristine, tmp_path, name, file,
                                                                    how):
    damage.check_damaged_store(pristine, tmp_path, name, file, how)
