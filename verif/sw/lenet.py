"""LeNet-5 for issue 31 item 4: the project's own network, trained here, in the files NVIDIA's
compiler reads (a Caffe prototxt, a caffemodel, an int8 calibration table).

* data: scikit-learn's bundled 8x8 digits (1,797 images, no download), values 0..16 scaled to
  0..255, enlarged 3x (nearest) to 24x24 and padded (2 pixels top/left, 3 bottom/right) to
  29x29; the last 100 images are the test digits, the others train the network.
* network: LeNet-5 (two convolutions with pooling, three fully connected layers; ReLU, max
  pooling) sized so that every layer's weights R*S*C*K are a multiple of 128 bytes, which
  NVIDIA's nv_small RTL needs (``<CDMA|CSC>.WEIGHT_BYTES``; NVIDIA's compiler rounds only to 8
  bytes, and a layer with 5x5x1x6 = 150 bytes, sent as 152, hangs the RTL): conv1 8@4x4 (29 ->
  26), relu1, pool1 2x2/2 (13), conv2 16@4x4 (10), relu2, pool2 2x2/2 (5), ip1 120, relu3,
  ip2 64, relu4, ip3 10; input x = pixel / 255.
* training: plain numpy (im2col convolutions, softmax cross-entropy, SGD with momentum), seeded:
  the same weights every time.
* files: the prototxt in Caffe's text format, the caffemodel as Caffe's binary ``NetParameter``
  written by a minimal protobuf encoder (field numbers from NVIDIA's
  ``umd/core/src/compiler/caffe/ditcaffe/ditcaffe.proto``: NetParameter.name 1, .layer 100;
  LayerParameter.name 1, .type 2, .blobs 7; BlobProto.shape 7, .data 5 packed; BlobShape.dim 1
  packed), and the calibration table in the JSON form of NVIDIA's
  ``umd/utils/calibdata/resnet50.json`` (per layer name a ``scale``: the layer's largest output
  / 127). The input's scale is 1/127: NVIDIA's runtime turns a pixel p into the int8 value
  round(p * 127 / 255) (``umd/apps/runtime/TestUtils.cpp`` createImageCopy), i.e. x * 127.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

N_TEST = 100
LAYERS = ("conv1", "relu1", "pool1", "conv2", "relu2", "pool2", "ip1", "relu3", "ip2", "relu4",
          "ip3")


SIZE = 29


def digits_29() -> tuple[np.ndarray, np.ndarray]:
    """(images uint8 [N, 29, 29], labels [N]) from scikit-learn's bundled digits."""
    from sklearn.datasets import load_digits
    d = load_digits()
    img = np.clip(d.images * 16, 0, 255).astype(np.uint8)
    img = np.kron(img, np.ones((1, 3, 3), np.uint8))
    img = np.pad(img, ((0, 0), (2, 3), (2, 3)))
    return img, d.target.astype(np.int64)


# ---- the float network ---------------------------------------------------------------------

def _im2col(x: np.ndarray, k: int) -> np.ndarray:
    n, c, h, w = x.shape
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))  # n c oh ow k k
    oh, ow = h - k + 1, w - k + 1
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n, oh * ow, c * k * k), oh, ow


def _conv(x, w, b):
    cols, oh, ow = _im2col(x, w.shape[2])
    out = cols @ w.reshape(w.shape[0], -1).T + b
    return out.transpose(0, 2, 1).reshape(x.shape[0], w.shape[0], oh, ow), cols


def _pool(x):
    n, c, h, w = x.shape
    r = x.reshape(n, c, h // 2, 2, w // 2, 2)
    return r.max(axis=(3, 5))


def init_params(seed: int = 1) -> dict[str, np.ndarray]:
    """He-initialised LeNet-5 parameters (Caffe layouts: conv [out, in, k, k], ip [out, in])."""
    rng = np.random.default_rng(seed)
    shapes = {"conv1": (8, 1, 4, 4), "conv2": (16, 8, 4, 4), "ip1": (120, 400), "ip2": (64, 120),
              "ip3": (10, 64)}
    p = {}
    for name, s in shapes.items():
        fan_in = int(np.prod(s[1:]))
        p[name + ".w"] = (rng.standard_normal(s) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        p[name + ".b"] = np.zeros(s[0], np.float32)
    return p


def forward(p: dict, x: np.ndarray, keep: bool = False):
    """Float forward pass on x [N, 1, 29, 29] (pixel / 255). Returns the logits, and with
    ``keep`` a dict of every layer's output (by layer name) plus the backward caches."""
    a = {}
    c1, cols1 = _conv(x, p["conv1.w"], p["conv1.b"])
    r1 = np.maximum(c1, 0)
    p1 = _pool(r1)
    c2, cols2 = _conv(p1, p["conv2.w"], p["conv2.b"])
    r2 = np.maximum(c2, 0)
    p2 = _pool(r2)
    f = p2.reshape(len(x), -1)
    i1 = f @ p["ip1.w"].T + p["ip1.b"]
    r3 = np.maximum(i1, 0)
    i2 = r3 @ p["ip2.w"].T + p["ip2.b"]
    r4 = np.maximum(i2, 0)
    i3 = r4 @ p["ip3.w"].T + p["ip3.b"]
    if not keep:
        return i3
    a.update(conv1=c1, relu1=r1, pool1=p1, conv2=c2, relu2=r2, pool2=p2, ip1=i1, relu3=r3,
             ip2=i2, relu4=r4, ip3=i3, _cols1=cols1, _cols2=cols2, _f=f, _x=x)
    return i3, a


def _pool_back(d, x, y):
    n, c, h, w = x.shape
    mask = (x.reshape(n, c, h // 2, 2, w // 2, 2) == y[:, :, :, None, :, None])
    return (mask * d[:, :, :, None, :, None]).reshape(x.shape)


def _col2im(dcols, shape, k):
    n, c, h, w = shape
    oh, ow = h - k + 1, w - k + 1
    d = dcols.reshape(n, oh, ow, c, k, k)
    out = np.zeros(shape, np.float32)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + oh, j:j + ow] += d[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return out


def _grads(p, x, y):
    logits, a = forward(p, x, keep=True)
    z = logits - logits.max(1, keepdims=True)
    prob = np.exp(z) / np.exp(z).sum(1, keepdims=True)
    n = len(x)
    d3 = prob.copy()
    d3[np.arange(n), y] -= 1
    d3 /= n
    g = {"ip3.w": d3.T @ a["relu4"], "ip3.b": d3.sum(0)}
    d2 = (d3 @ p["ip3.w"]) * (a["ip2"] > 0)
    g["ip2.w"], g["ip2.b"] = d2.T @ a["relu3"], d2.sum(0)
    d1 = (d2 @ p["ip2.w"]) * (a["ip1"] > 0)
    g["ip1.w"], g["ip1.b"] = d1.T @ a["_f"], d1.sum(0)
    dp2 = (d1 @ p["ip1.w"]).reshape(a["pool2"].shape)
    dc2 = _pool_back(dp2, a["relu2"], a["pool2"]) * (a["conv2"] > 0)
    dc2f = dc2.reshape(n, 16, -1).transpose(0, 2, 1)                   # n, pos, 16
    g["conv2.w"] = np.einsum("npf,npk->fk", dc2f, a["_cols2"]).reshape(p["conv2.w"].shape)
    g["conv2.b"] = dc2f.sum((0, 1))
    dcols2 = dc2f @ p["conv2.w"].reshape(16, -1)
    dp1 = _col2im(dcols2, a["pool1"].shape, p["conv2.w"].shape[2])
    dc1 = _pool_back(dp1, a["relu1"], a["pool1"]) * (a["conv1"] > 0)
    dc1f = dc1.reshape(n, p["conv1.w"].shape[0], -1).transpose(0, 2, 1)
    g["conv1.w"] = np.einsum("npf,npk->fk", dc1f, a["_cols1"]).reshape(p["conv1.w"].shape)
    g["conv1.b"] = dc1f.sum((0, 1))
    loss = -np.log(prob[np.arange(n), y] + 1e-12).mean()
    return g, loss


def train(images: np.ndarray, labels: np.ndarray, *, epochs: int = 24, batch: int = 32,
          lr: float = 0.02, seed: int = 1, log=None) -> dict[str, np.ndarray]:
    """Train LeNet-5 on ``images`` (uint8 [N, 29, 29]) with SGD + momentum 0.9, seeded; the
    learning rate halves every 6 epochs."""
    rng = np.random.default_rng(seed)
    p = init_params(seed)
    v = {k: np.zeros_like(w) for k, w in p.items()}
    x = (images[:, None].astype(np.float32) / 255.0)
    for ep in range(epochs):
        rate = lr * 0.5 ** (ep // 6)
        order = rng.permutation(len(x))
        losses = []
        for i in range(0, len(x), batch):
            idx = order[i:i + batch]
            g, loss = _grads(p, x[idx], labels[idx])
            losses.append(loss)
            for k in p:
                v[k] = 0.9 * v[k] - rate * g[k].astype(np.float32)
                p[k] = p[k] + v[k]
        if log:
            log(f"epoch {ep + 1}: loss {np.mean(losses):.4f}")
    return p


def accuracy(p: dict, images: np.ndarray, labels: np.ndarray) -> float:
    """Float top-1 accuracy."""
    logits = forward(p, images[:, None].astype(np.float32) / 255.0)
    return float((logits.argmax(1) == labels).mean())


# ---- NVIDIA's compiler inputs -----------------------------------------------------------------

PROTOTXT = """name: "LeNet5"
input: "data"
input_dim: 1
input_dim: 1
input_dim: 29
input_dim: 29
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 4 stride: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 16 kernel_size: 4 stride: 1 } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
  inner_product_param { num_output: 120 } }
layer { name: "relu3" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 64 } }
layer { name: "relu4" type: "ReLU" bottom: "ip2" top: "ip2" }
layer { name: "ip3" type: "InnerProduct" bottom: "ip2" top: "ip3"
  inner_product_param { num_output: 10 } }
"""


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:          # length-delimited (wire type 2)
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _blob(a: np.ndarray) -> bytes:
    shape = _field(1, b"".join(_varint(d) for d in a.shape))            # BlobShape.dim, packed
    return _field(7, shape) + _field(5, a.astype("<f4").tobytes())      # BlobProto.shape, .data


def caffemodel_bytes(p: dict) -> bytes:
    """The trained weights as Caffe's binary NetParameter (module docstring)."""
    out = _field(1, b"LeNet5")
    for name, typ in (("conv1", "Convolution"), ("conv2", "Convolution"),
                      ("ip1", "InnerProduct"), ("ip2", "InnerProduct"), ("ip3", "InnerProduct")):
        layer = (_field(1, name.encode()) + _field(2, typ.encode())
                 + _field(7, _blob(p[name + ".w"])) + _field(7, _blob(p[name + ".b"])))
        out += _field(100, layer)
    return out


def calibration(p: dict, images: np.ndarray) -> dict:
    """NVIDIA's calibration table: per layer the largest output over ``images`` / 127 (an
    in-place ReLU's convolution or inner product takes the ReLU's range)."""
    _, a = forward(p, images[:, None].astype(np.float32) / 255.0, keep=True)
    table = {"data": 1.0 / 127}
    for name in LAYERS:
        table[name] = float(np.abs(a[name]).max()) / 127
    for conv, relu in (("conv1", "relu1"), ("conv2", "relu2"), ("ip1", "relu3"), ("ip2", "relu4")):
        table[conv] = table[relu]
    return {k: {"scale": v, "min": 0, "max": 0, "offset": 0} for k, v in table.items()}


def write_pgm(path: Path, img: np.ndarray) -> None:
    """A binary (P5) 8-bit PGM, the runtime's --image input."""
    h, w = img.shape
    path.write_bytes(f"P5\n{w} {h}\n255\n".encode() + img.astype(np.uint8).tobytes())


def make_network(out: Path, *, log=None) -> dict:
    """Train LeNet-5 and write ``lenet5.prototxt``, ``lenet5.caffemodel``, ``lenet5.json``
    (calibration), ``weights.npz`` and the 100 test digits ``digit_NNN_L.pgm`` to ``out``.
    Returns a summary (float accuracy on the test digits, file paths)."""
    out.mkdir(parents=True, exist_ok=True)
    img, lab = digits_29()
    tr_i, tr_l, te_i, te_l = img[:-N_TEST], lab[:-N_TEST], img[-N_TEST:], lab[-N_TEST:]
    p = train(tr_i, tr_l, log=log)
    (out / "lenet5.prototxt").write_text(PROTOTXT)
    (out / "lenet5.caffemodel").write_bytes(caffemodel_bytes(p))
    (out / "lenet5.json").write_text(json.dumps(calibration(p, tr_i), indent=1))
    np.savez(out / "weights.npz", **p)
    for i, (im, lb) in enumerate(zip(te_i, te_l)):
        write_pgm(out / f"digit_{i:03d}_{lb}.pgm", im)
    acc = accuracy(p, te_i, te_l)
    summary = {"float_test_accuracy": acc, "train_accuracy": accuracy(p, tr_i, tr_l),
               "dir": str(out)}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


# ---- through NVIDIA's compiler, runtime and firmware ------------------------------------------

def compile_network(net_dir: Path, compiler: Path, out_dir: Path) -> Path:
    """Compile ``net_dir``'s LeNet-5 with NVIDIA's compiler for nv_small in int8 with the
    calibration table (``--configtarget nv_small --cprecision int8 --calibtable --informat
    nchw``: the target configuration is named ``nv_small`` in the compiler's TargetConfig.cpp,
    whatever its --help says); returns
    the loadable (``fast-math.nvdla``, the compiler's default profile). Raises RuntimeError with
    the compiler's last lines."""
    import subprocess
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = [str(Path(compiler).resolve()), "--prototxt", str((net_dir / "lenet5.prototxt").resolve()),
           "--caffemodel", str((net_dir / "lenet5.caffemodel").resolve()),
           "--configtarget", "nv_small", "--cprecision", "int8",
           "--calibtable", str((net_dir / "lenet5.json").resolve()), "--informat", "nchw",
           "-o", "./"]
    r = subprocess.run(cmd, cwd=out_dir, capture_output=True, text=True)
    (out_dir / "compiler.log").write_text(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    loadable = out_dir / "fast-math.nvdla"
    if r.returncode != 0 or not loadable.is_file():
        tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-4:])
        raise RuntimeError(f"NVIDIA's compiler failed (rc {r.returncode}): {tail} "
                           f"(log {out_dir / 'compiler.log'})")
    return loadable


def classify(image: bytes) -> tuple[int, list[int]]:
    """(class, the ten int8 scores) from the runtime's output image of ip3."""
    from verif.sw.dimg import parse
    d = parse(image)
    scores = [int(v) for v in np.frombuffer(d.data[:10 * d.bpe], np.int8)[::d.bpe]]
    return int(np.argmax(scores)), scores


def run_digits(loadable: Path, net_dir: Path, engine: str = "model", n: int = N_TEST, *,
               kmd: Path | None = None, cfg=None, timing=None, log=None) -> dict:
    """Run the first ``n`` test digits of ``net_dir`` through NVIDIA's runtime and firmware on
    ``engine``; returns per digit the class, scores and cycles, and the agreement with the
    float network (``weights.npz``) and with the labels."""
    from verif.sw.runner import run_loadable
    p = dict(np.load(net_dir / "weights.npz"))
    digits = sorted(net_dir.glob("digit_*.pgm"))[:n]
    out = []
    for f in digits:
        label = int(f.stem.rsplit("_", 1)[1])
        img = np.frombuffer(f.read_bytes()[-SIZE * SIZE:], np.uint8).reshape(1, 1, SIZE, SIZE)
        fl = int(forward(p, img.astype(np.float32) / 255.0).argmax())
        r = run_loadable(loadable, engine, cfg, timing=timing, check_golden=False, image=f,
                         kmd=kmd)
        if r.status != "PASS":
            raise RuntimeError(f"{f.name} on {engine}: {r.message}")
        cls, scores = classify(r.output.read_bytes())
        out.append({"digit": f.name, "label": label, "float": fl, "class": cls,
                    "scores": scores, "cycles": r.cycles, "md5": r.md5,
                    "layers": layer_cycles(r.timeline) if r.cycles else []})
        if log:
            log(f"{f.name}: label {label} float {fl} {engine} {cls} cycles {r.cycles}")
    k = len(out)
    return {"engine": engine, "n": k, "digits": out,
            "agree_float": sum(d["class"] == d["float"] for d in out) / k if k else 0.0,
            "accuracy": sum(d["class"] == d["label"] for d in out) / k if k else 0.0}


#: the hardware layers NVIDIA's compiler makes of LeNet-5 (convolutions and inner products run
#: on the convolution pipeline with SDP, poolings on PDP) and their multiply-accumulates
HW_LAYERS = (("conv1", 26 * 26 * 8 * 4 * 4 * 1), ("pool1", 0), ("conv2", 10 * 10 * 16 * 4 * 4 * 8),
             ("pool2", 0), ("ip1", 400 * 120), ("ip2", 120 * 64), ("ip3", 64 * 10))


def layer_cycles(timeline: list) -> list[tuple[str, int, int]]:
    """(unit, start, end) per hardware layer from a run's timeline
    (``verif.sw.host.FirmwareHost.timeline``): a convolution from its CDMA kick-off to the SDP
    done interrupt after its CACC done, a pooling from its PDP kick-off to its PDP done."""
    conv, pdp, out, waiting = [], [], [], None
    for cycle, what in timeline:
        if what == "kick CDMA":
            conv.append(cycle)
        elif what == "kick PDP":
            pdp.append(cycle)
        elif what.startswith("done"):
            names = what.split()[1:]
            if any(n.startswith("CACC_DONE") for n in names) and conv:
                waiting = conv.pop(0)
            if any(n.startswith("SDP_DONE") for n in names) and waiting is not None:
                out.append(("conv", waiting, cycle))
                waiting = None
            if any(n.startswith("PDP_DONE") for n in names) and pdp:
                out.append(("pdp", pdp.pop(0), cycle))
    return sorted(out, key=lambda t: t[1])
