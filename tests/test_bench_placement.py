"""scripts/bench_placement.py: a new placement must move every parameter and buffer, and keep their values."""

import torch


def test_fresh_parameters_move_every_tensor_and_keep_its_values(load_script):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    before = {k: (v.data_ptr(), v.clone()) for k, v in model.state_dict().items()}
    pad: list = []
    load_script("bench_placement")._fresh_parameters(model, pad, 1 << 20)
    after = model.state_dict()
    assert len(pad) == 1 and pad[0].numel() == 1 << 20
    for k, (ptr, value) in before.items():
        assert after[k].data_ptr() != ptr, k
        assert torch.equal(after[k], value), k
    assert isinstance(model[0].weight, torch.nn.Parameter)  # still a parameter, not a plain tensor


def test_alternating_placements_go_back_to_the_same_storage(load_script):
    bench = load_script("bench_placement")
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    a = bench._placement_of(model)
    bench._fresh_parameters(model, [], 1 << 20)
    b = bench._placement_of(model)
    for placement in (a, b, a):
        bench._use_placement(model, placement)
        state = model.state_dict()
        assert [t.data_ptr() for t in state.values()] == [t.data_ptr() for t in placement]
        assert all(torch.equal(state[k], v) for k, v in before.items())
    assert {t.data_ptr() for t in a}.isdisjoint(t.data_ptr() for t in b)
    assert isinstance(model[0].weight, torch.nn.Parameter)
