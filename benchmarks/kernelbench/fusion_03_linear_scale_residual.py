"""Linear, scaled by a scalar, plus a residual add of the input."""

import torch
import torch.nn as nn

batch_size = 4096
dim = 4096
scale = 0.5


class Model(nn.Module):
    def __init__(self, dim, scale):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.scale = scale

    def forward(self, x):
        return self.fc(x) * self.scale + x


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim, scale]
