"""Language server latency: from `textDocument/didChange` to the `publishDiagnostics` of that version,
for a 1,000-line training file, median of 20 edits after the server is warm.

    python bench/lsp_bench.py [--edits 20] [--debounce-ms 50] [--shape fixtures|class]

Spawns `cliplint server` (as an editor would) and talks to it over stdio with pygls' client. The
file is the TensorFlow fixtures one after another (real training-code shapes with findings in
them), padded to 1,000 lines with model-building code. Each edit types a space into the empty
line in the middle of the file, or deletes it again, as an incremental change (that line
belongs to the class statement below it: the server re-parses that class, about 1,200
characters, and runs every rule on the whole module). `--shape class`: a file that is one
class of 1,000 lines instead, the space typed into the empty line between two of its methods
(the server re-parses that method). The next edit is sent once the previous
version's diagnostics have arrived. The time includes the JSON-RPC round trip and any wait the
server's leading-edge debounce imposes (`--debounce-ms`, the server's default unless given: a
lint starts at once unless the document's last one started less than that ago). Target
(issue 19): under 100 ms warm.
"""
from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

from lsprotocol import types
from pygls.lsp.client import LanguageClient

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ["actor_critic", "clip_pitfalls_custom_loop", "two_stage_training", "multihead_energy_model",
            "double_softmax_classifier", "keras_fit_mnist", "finetune_callbacks", "clean_global_norm",
            "custom_loop_gradient_tape", "distribution_strategy", "train_step_override", "optimizer_factory",
            "mixed_precision", "sequential_probabilities", "tf1_compat_graph"]
LINES = 1000
WARM_UP = 5


def one_class_file() -> str:
    """A trainer that is one big class, as much training code is: 1,000 lines of methods."""
    lines = ["import tensorflow as tf", "", "", "class Trainer:", "    def __init__(self, model):",
             "        self.model = model", "        self.opt = tf.keras.optimizers.Adam(1e-3)", ""]
    step = 0
    while len(lines) < LINES:
        lines.extend([f"    def step_{step}(self, x, y):", "        with tf.GradientTape() as tape:",
                      "            logits = self.model(x, training=True)",
                      "            loss = tf.reduce_mean(",
                      "                tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))",
                      "        grads = tape.gradient(loss, self.model.trainable_variables)",
                      "        grads = [tf.clip_by_norm(g, 1.0) for g in grads]",
                      "        self.opt.apply_gradients(zip(grads, self.model.trainable_variables))", ""])
        step += 1
    return "\n".join(lines) + "\n"  # whole methods: a line or two over


def training_file() -> str:
    lines = []
    for name in FIXTURES:
        lines.extend((ROOT / "fixtures" / f"{name}.py").read_text(encoding="utf-8").splitlines())
    block = 0
    while len(lines) < LINES:
        lines.extend([f"def block_{block}(inputs):",
                      f"    x = tf.keras.layers.Dense({64 + block}, activation='relu')(inputs)",
                      "    x = tf.keras.layers.Dropout(0.1)(x)",
                      "    return tf.keras.layers.LayerNormalization()(x)", ""])
        block += 1
    return "\n".join(lines[:LINES]) + "\n"


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("lsp-bench", "1")
        self.arrived: dict = {}  # version -> (perf_counter time, number of diagnostics)
        self.waiting: dict = {}

        @self.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            self.arrived[params.version] = (time.perf_counter(), len(params.diagnostics))
            waiter = self.waiting.pop(params.version, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(None)

    async def version_published(self, version: int) -> float:
        if version not in self.arrived:
            self.waiting[version] = asyncio.get_running_loop().create_future()
            await asyncio.wait_for(self.waiting[version], 120)
        return self.arrived[version][0]


async def measure(edits: int, debounce_ms, shape: str) -> dict:
    client = Client()
    await client.start_io(sys.executable, "-m", "cliplint", "server")
    folder = Path.cwd()
    options = {} if debounce_ms is None else {"debounceMs": debounce_ms}
    await client.initialize_async(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=folder.as_uri(), initialization_options=options,
        workspace_folders=[types.WorkspaceFolder(uri=folder.as_uri(), name=folder.name)]))
    client.initialized(types.InitializedParams())
    uri = (folder / "bench_training_file.py").as_uri()
    text = one_class_file() if shape == "class" else training_file()
    started = time.perf_counter()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=text)))
    first = await client.version_published(1) - started
    lines = text.split("\n")
    middle = next(number for number in range(LINES // 2, LINES) if not lines[number].strip())
    times = []
    for version in range(2, 2 + WARM_UP + edits):
        sent = time.perf_counter()
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(
                range=types.Range(types.Position(middle, 0), types.Position(middle, 0)), text=" " if version % 2
                else "")]))
        times.append(await client.version_published(version) - sent)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    warm = times[WARM_UP:]
    return {"open": first, "median": statistics.median(warm), "min": min(warm), "max": max(warm),
            "findings": client.arrived[1][1], "lines": text.count("\n")}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--edits", type=int, default=20)
    parser.add_argument("--debounce-ms", type=float, default=None, help="default: the server's own")
    parser.add_argument("--shape", choices=("fixtures", "class"), default="fixtures")
    args = parser.parse_args()
    result = asyncio.run(measure(args.edits, args.debounce_ms, args.shape))
    debounce = "server default" if args.debounce_ms is None else f"{args.debounce_ms:g} ms"
    print(f"didChange -> publishDiagnostics, {result['lines']}-line {args.shape} file ({result['findings']} findings), "
          f"debounce {debounce}: median {1000 * result['median']:.1f} ms over {args.edits} edits "
          f"(min {1000 * result['min']:.1f}, max {1000 * result['max']:.1f}); "
          f"first open {1000 * result['open']:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
