"""Random differential testing of the Python path (tests/python/random_cases.py): a fixed set
of random cases (user modules, heads, batches, methods) all match full BPTT, and defects
planted in the bridge (vlrnn/_adapters.py) are each caught by at least one of them.

A failing case prints its one-line description; rebuild it with
random_cases.case_from_seed(SEED), or run
`python3 scripts/verify_python_random.py --case SEED`.

Shapes: B = batch, T = steps, Z = the rnn's output features.
"""
import pytest
import torch
from torch.nn.utils.rnn import PackedSequence

import vlrnn
from vlrnn import _adapters, modules
from random_cases import NestedState, LinearCrossEntropy, case_from_seed, case_seeds, \
    check_case

RUN_SEED = 20240601
CASES = 400  # 15-25 s on one core of the 2-core development machine, with other work
SEEDS = case_seeds(RUN_SEED, CASES)


def failures(case):
    return [r for r in check_case(case) if not r.passed]


def test_every_random_case_matches_full_bptt():
    failed = []
    for seed in SEEDS:
        case = case_from_seed(seed)
        failed += [f"{case.description}\n    {r.method}: max_rel_diff {r.max_rel_diff:.3g} "
                   f"at {r.worst} {r.error}" for r in failures(case)]
    assert not failed, f"{len(failed)} of the random cases differ from full BPTT:\n" + \
        "\n".join(failed)


def test_the_random_set_covers_every_part():
    # A change to the generator that stops drawing a part would silently narrow the test.
    described = "\n".join(case_from_seed(seed).description for seed in SEEDS)
    for part in ["rnn=torch:", "rnn=subclassed:", "rnn=wrapped:", "rnn=noncontiguous:",
                 "dropout=0.4,eval", "rnn=cell_loop:gru,dropout=0.3", "rnn=cell_loop:lstm",
                 "rnn=cell_loop:rnn", "rnn=composite:torch.nn",
                 "rnn=composite:vlrnn.nn,dropout=0.3", "rnn=vlrnn_nn:",
                 "rnn=bidirectional:torch.nn", "rnn=bidirectional:vlrnn.nn",
                 "head=linear_ce", "head=mlp", "head=mse", "head=padding_aware",
                 "packed:ties", "packed:ones", "packed:equal", "packed:sorted", "packed:single",
                 "fixed B=", "transposed B=", "h0=none", "h0=given", "h0=grad", ",transposed",
                 "x_grad=True", "SUM", "MEAN", "fast_cells=True", "fast_cells=False",
                 "'revolve:slots=2'", "'checkpoint'", "'planner:percent=20'", "'VLRNN(N=",
                 "'call N=", "'bivlrnn:num_blocks=", "'full'"]:
        assert part in described, f"no case of the fixed set has {part}"


def test_a_nested_state_is_refused_by_name():
    # The engine carries a state of tensors [L, B, ...], or a flat tuple of them; a nested
    # tuple is refused before anything runs, so the generator never draws one.
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    y = torch.randint(0, 2, (2, 5))
    rnn, out = NestedState(3, 4).double(), LinearCrossEntropy(8, 2).double()
    with pytest.raises(TypeError, match=r"NestedState.forward's h: expected a tensor or a "
                                        r"tuple of tensors"):
        vlrnn.VLRNN(rnn, out, "SUM")(x, y, None, N=2)


# ---------------------------------------------------------- defects planted in the bridge

def first_caught(seeds=SEEDS):
    """The first case of the fixed set with a failing method, (description, results), or
    None: a mutant's test stops there."""
    for seed in seeds:
        case = case_from_seed(seed)
        failed = failures(case)
        if failed:
            return case.description, failed
    return None


def on_one_grad_call(monkeypatch, classes, which, mutated):
    """Replaces each class's __call__ so that the `which`-th call made with gradients on, per
    instance (one engine call's block or head function), runs mutated(original, self, *args)
    instead. The engine recomputes blocks with gradients last to first: the first such call
    is the last block, whose exit state gets no gradient from later steps. VLRNN's first-call
    check (which runs the block function with gradients too) is not counted: the mutants
    stand for defects in the engine's calls."""
    checking = []
    real_check = modules.cut_dependence

    def check(call):
        checking.append(True)
        try:
            return real_check(call)
        finally:
            checking.pop()
    monkeypatch.setattr(modules, "cut_dependence", check)
    for cls in classes:
        original = cls.__call__

        def call(self, *args, original=original):
            if torch.is_grad_enabled() and not checking:
                self.grad_calls = getattr(self, "grad_calls", 0) + 1
                if self.grad_calls == which:
                    return mutated(original, self, *args)
            return original(self, *args)
        monkeypatch.setattr(cls, "__call__", call)


BLOCK_FUNCTIONS = (_adapters.BlockFunction, _adapters.EngineLayoutBlock)


def assert_caught(mutant):
    caught = first_caught()
    assert caught is not None, f"no case of the fixed set catches the mutant: {mutant}"
    description, failed = caught
    print(f"{mutant}: caught by {description}: " +
          "; ".join(f"{r.method} {r.max_rel_diff:.3g} at {r.worst} {r.error}" for r in failed))


def test_mutant_reading_packed_output_in_the_input_order_is_caught(monkeypatch):
    # The bug fixed in f07b11b: z.data read in the order the input was packed, ignoring
    # z's own sorted_indices (a module that repacks its output may order ties otherwise).
    original = _adapters.BlockFunction._call_rnn

    def call_rnn(self, x, *args):
        z, h = original(self, x, *args)
        if isinstance(z, PackedSequence) and isinstance(x, PackedSequence):
            z = PackedSequence(z.data, z.batch_sizes, x.sorted_indices, x.unsorted_indices)
        return z, h
    monkeypatch.setattr(_adapters.BlockFunction, "_call_rnn", call_rnn)
    assert_caught("packed output read in the input's order")


def test_mutant_dropping_a_blocks_state_gradient_is_caught(monkeypatch):
    def detached_exit(original, self, x, state, lengths):
        z, h = original(self, x, state, lengths)
        return z, tuple(t.detach() for t in h)
    on_one_grad_call(monkeypatch, BLOCK_FUNCTIONS, 2, detached_exit)
    assert_caught("a block's exit state returned detached")


def test_mutant_swapping_two_sequences_entry_states_is_caught(monkeypatch):
    def swapped_entry(original, self, x, state, lengths):
        batch = x.shape[1]
        if batch > 1:
            order = torch.arange(batch)
            order[[0, 1]] = order[[1, 0]]
            state = tuple(t.index_select(_adapters.BATCH_DIM, order) for t in state)
        return original(self, x, state, lengths)
    on_one_grad_call(monkeypatch, BLOCK_FUNCTIONS, 2, swapped_entry)
    assert_caught("two sequences' states swapped at a block's entry")


def test_mutant_counting_a_blocks_loss_twice_is_caught(monkeypatch):
    on_one_grad_call(monkeypatch, [_adapters.HeadFunction], 1,
                     lambda original, self, z, y: 2 * original(self, z, y))
    assert_caught("one block's loss counted twice")
