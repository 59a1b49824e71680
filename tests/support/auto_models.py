"""A small torch model for auto mode: the GPU tests torch.compile it, and
tests/fixtures/make_inductor_kernels.py compiles it to regenerate the Inductor kernels fixture."""

import torch


class Block(torch.nn.Module):
    """A transformer-shaped MLP block: layer norm, two linear layers, GELU, residual."""

    def __init__(self, d):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln(x))))


def train_step(model, x):
    """One forward and backward pass: the loss and every gradient, copied."""
    model.zero_grad(set_to_none=True)
    loss = model(x).float().pow(2).mean()
    loss.backward()
    return [loss.detach().clone()] + [p.grad.detach().clone() for p in model.parameters()]
