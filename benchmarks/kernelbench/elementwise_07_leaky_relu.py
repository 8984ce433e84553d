"""LeakyReLU with a negative_slope given at construction."""

import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
dim = 16384
negative_slope = 0.01


class Model(nn.Module):
    def __init__(self, negative_slope):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [negative_slope]
