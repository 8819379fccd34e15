#!/usr/bin/python3
"""torchrun, with a fix for Debian's torch 1.13.1 on Python 3.11 -- for the benchmarks only.

Usage: /usr/bin/python3 bench/torchrun_patched.py [torchrun options] SCRIPT [ARGS...]
       e.g. /usr/bin/python3 bench/torchrun_patched.py --nproc_per_node 8 --no_python /bin/true

Why: torch.distributed.elastic.multiprocessing.api.Std.from_str maps "0".."3" to a Std member by
iterating over the IntFlag. From Python 3.11 on, iterating a Flag yields only its canonical
(single-bit) members, so "0" (NONE) and "3" (ALL) map to None, and torchrun's default
`--redirects 0` crashes in to_map() with "'NoneType' object has no attribute 'get'".

This wrapper replaces Std.from_str with a correct implementation (Std(int(v)) is the value
lookup the original meant), rebinds it wherever the name Std is visible, and then runs
torch.distributed.run.main() exactly as the torchrun console script does. Nothing under
/usr/lib is modified.
"""
import re
import sys
from typing import Dict, Union

import torch.distributed.elastic.multiprocessing as tem
import torch.distributed.elastic.multiprocessing.api as tem_api

_Std = tem_api.Std
_VALUE_REGEX = getattr(tem_api, "_VALUE_REGEX", r"^[0123]$")
_MAPPING_REGEX = getattr(tem_api, "_MAPPING_REGEX", r"^(\d:[0123],)*(\d:[0123])$")


def _from_str(cls, vm: str) -> Union["tem_api.Std", Dict[int, "tem_api.Std"]]:
    """"0".."3" -> Std(n); "0:1,1:2" -> {0: Std.OUT, 1: Std.ERR}; anything else raises ValueError."""
    if re.match(_VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(_MAPPING_REGEX, vm):
        d: Dict[int, "tem_api.Std"] = {}
        for m in vm.split(","):
            i, v = m.split(":")
            d[int(i)] = cls(int(v))
        return d
    raise ValueError(f"{vm} does not match: <{_VALUE_REGEX}> or <{_MAPPING_REGEX}>")


def _patch() -> None:
    patched = classmethod(_from_str)
    # The class is one object however it is imported, so setting the attribute on it fixes every
    # `Std.from_str(...)` call site (torch.distributed.run, launcher.api, ...). Rebind in each
    # module that holds the name anyway, in case some module holds a different class object.
    import torch.distributed.launcher.api as launcher_api
    import torch.distributed.run as run_mod

    seen = set()
    for mod in (tem_api, tem, launcher_api, run_mod):
        std = getattr(mod, "Std", None)
        if std is not None and id(std) not in seen:
            seen.add(id(std))
            std.from_str = patched


def _self_check() -> None:
    Std = tem_api.Std
    assert Std.from_str("0") is Std.NONE, Std.from_str("0")
    assert Std.from_str("1") is Std.OUT
    assert Std.from_str("2") is Std.ERR
    assert Std.from_str("3") is Std.ALL, Std.from_str("3")
    assert Std.from_str("0:3,1:0,2:1,3:2") == {0: Std.ALL, 1: Std.NONE, 2: Std.OUT, 3: Std.ERR}
    try:
        Std.from_str("4")
    except ValueError:
        pass
    else:
        raise AssertionError("from_str('4') must raise")


if __name__ == "__main__":
    _patch()
    _self_check()
    if len(sys.argv) > 1 and sys.argv[1] == "--self-check":
        print("torchrun_patched: Std.from_str OK")
        sys.exit(0)
    from torch.distributed.run import main

    sys.argv[0] = "torchrun"
    sys.exit(main())
