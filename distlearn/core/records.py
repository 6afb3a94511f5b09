"""The record specs that many public functions check at their entry (:func:`distlearn.core.validate.checks`): a
model, a GPU, a cluster, each with a call that makes one for the error message."""
from __future__ import annotations

from distlearn.core.hardware import GPU as _GPU, Cluster as _Cluster
from distlearn.core.models import ModelConfig as _ModelConfig
from distlearn.core.validate import record

MODEL = record(_ModelConfig, "get_preset('llama3-8b')")
GPU = record(_GPU, "get_gpu('h100-80gb')")
CLUSTER = record(_Cluster, "make_cluster('h100-80gb', 8)")
