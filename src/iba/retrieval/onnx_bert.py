"""The same BERT forward pass as minilm.NumpyBert, run by onnxruntime (extra `iba[onnx]`).

The graph is built in memory from the NumpyBert's weights (so from the packaged safetensors; no
export step, no torch) with onnxruntime's fused CPU kernels for attention, skip + LayerNorm and
bias + GELU. It returns mean-pooled vectors; the embedder normalises them. About 1.4x the numpy
path on this machine (bench/BENCHMARKS.md, performance suite); equal to it to cosine > 0.99999.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from iba.retrieval.minilm import NumpyBert

INSTALL = "pip install 'iba[onnx]'  (onnx and onnxruntime)"


def available() -> bool:
    import importlib.util

    return all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxruntime"))


def build_graph(bert: NumpyBert) -> bytes:
    """The serialized ONNX model: input_ids (B, L) int64, attention_mask (B, L) float32 -> pooled (B, H)."""
    from onnx import TensorProto, helper, numpy_helper

    inits: list = []
    nodes: list = []

    def const(name: str, arr: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    ms = {"domain": "com.microsoft"}
    hidden = bert.word.shape[1]
    length = node("Gather", [node("Shape", ["input_ids"]), const("one", np.array(1, np.int64))], axis=0)
    positions = node("Range", [const("zero", np.array(0, np.int64)), length, const("step", np.array(1, np.int64))])
    x = node("Add", [node("Gather", [const("word", bert.word), "input_ids"]), node("Gather", [const("pos", bert.pos), positions])])
    x = node("Add", [x, const("type0", bert.type0)])
    x = node("LayerNormalization", [x, const("eln_w", bert.emb_ln[0]), const("eln_b", bert.emb_ln[1])], axis=-1, epsilon=bert.eps)
    mask_index = node("Cast", ["attention_mask"], to=TensorProto.INT32)
    for i, lyr in enumerate(bert.layers):
        # NumpyBert folded 1/sqrt(head dim) into the query projection already: scale 1
        att = node("Attention", [x, const(f"qkv_w{i}", lyr["qkv_w"]), const(f"qkv_b{i}", lyr["qkv_b"]), mask_index],
                   num_heads=bert.heads, scale=1.0, **ms)
        out = node("MatMul", [att, const(f"out_w{i}", lyr["out_w"])])
        x = node("SkipLayerNormalization", [out, x, const(f"ln1_w{i}", lyr["ln1"][0]), const(f"ln1_b{i}", lyr["ln1"][1]),
                                            const(f"out_b{i}", lyr["out_b"])], epsilon=bert.eps, **ms)
        ff = node("BiasGelu", [node("MatMul", [x, const(f"in_w{i}", lyr["in_w"])]), const(f"in_b{i}", lyr["in_b"])], **ms)
        ff = node("MatMul", [ff, const(f"ff_w{i}", lyr["ff_w"])])
        x = node("SkipLayerNormalization", [ff, x, const(f"ln2_w{i}", lyr["ln2"][0]), const(f"ln2_b{i}", lyr["ln2"][1]),
                                            const(f"ff_b{i}", lyr["ff_b"])], epsilon=bert.eps, **ms)
    mask3 = node("Unsqueeze", ["attention_mask", const("axis2", np.array([2], np.int64))])
    summed = node("ReduceSum", [node("Mul", [x, mask3]), const("axis1", np.array([1], np.int64))], keepdims=0)
    count = node("ReduceSum", ["attention_mask", const("axis1b", np.array([1], np.int64))], keepdims=1)
    pooled = node("Div", [summed, node("Max", [count, const("tiny", np.array(1e-9, np.float32))])])
    nodes.append(helper.make_node("Identity", [pooled], ["pooled"]))
    graph = helper.make_graph(
        nodes, "minilm",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["B", "L"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["B", "L"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["B", hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


class OnnxBert:
    """Pooled BERT vectors from an onnxruntime session over `build_graph(bert)`."""

    def __init__(self, bert: NumpyBert, threads: int) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise RuntimeError(f"the onnx embedding engine needs onnxruntime: {INSTALL}") from None
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        # no busy-waiting threads: on cores shared with llama.cpp a spinning pool stalls both
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        so.log_severity_level = 3  # no warnings about unused initializers on stderr
        self.session = ort.InferenceSession(build_graph(bert), so, providers=["CPUExecutionProvider"])

    def __call__(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return self.session.run(["pooled"], {"input_ids": ids, "attention_mask": mask})[0]
