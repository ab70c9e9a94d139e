"""What the rules know about a module's values, one `Flow` per module (`ctx.flow`).

    nodes.py          CST utilities: children, walk, target names, call arguments, `None` tests,
                      a search by source order
    bindings.py       what a binding is; `LocalFlow`, the part of the dataflow its mixins use
    local.py          local dataflow: bindings, scopes, values, aliases, self attributes
    calls.py          calls between the module's functions: callee, returns, call sites, arguments
    constants.py      constant folding, argparse/absl flag defaults
    gradients.py      the gradient model: gradient lists, their elements, `None` guards
    probabilities.py  where softmax/sigmoid outputs come from
    snippets.py       what the verifier re-executes for a finding

`Flow` is the module's dataflow with the gradient and probability models built on it; rules
import helpers and types from the submodule that owns them.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from ..names import SIGMOID, SOFTMAX
from ..probes import Snippet
from .constants import constant, literal_numbers
from .formulas import feeds
from .gradients import Element, Gradients, GradList
from .local import Binding, Dataflow
from .nodes import ModuleIndex, arg
from .probabilities import Compiled, Probabilities, Source
from .snippets import snippet

NO_SNIPPET = Snippet("")


class Flow(Dataflow):
    def __init__(self, ctx: ModuleIndex, probes: bool = True) -> None:
        """`probes`: build what the verifier re-executes (False: the findings carry no probe;
        an editor's live diagnostics skip that third of the work until it asks to verify)."""
        super().__init__(ctx)
        self.probes = probes
        self.gradients = Gradients(self)
        self.probabilities = Probabilities(self)
        self._trained: Dict[cst.CSTNode, bool] = {}

    def constant(self, expr: Optional[cst.BaseExpression]):
        """The literal value an expression is known to hold, else `local.UNKNOWN`."""
        return constant(self, expr)

    def snippet(self, node: cst.CSTNode) -> Snippet:
        """The snippet for `node` (it carries the node: a fix is replayed on the node itself); an
        empty one when the findings carry no probe."""
        return snippet(self, node) if self.probes else NO_SNIPPET

    def gradient_list(self, expr: Optional[cst.BaseExpression]) -> Optional[GradList]:
        return self.gradients.gradient_list(expr)

    def gradient_element(self, use: cst.BaseExpression) -> Optional[Tuple[GradList, Binding]]:
        return self.gradients.gradient_element(use)

    def element_taken(self, use: cst.BaseExpression, result: cst.CSTNode) -> Optional[Element]:
        return self.gradients.element_taken(use, result)

    def none_guarded(self, use: cst.Name, binding: Binding) -> bool:
        return self.gradients.none_guarded(use, binding)

    def probability(self, expr: Optional[cst.BaseExpression]) -> Optional[Source]:
        """(softmax | sigmoid | 1-sigmoid, producing node, padded) when `expr` holds probabilities.
        Not a softmax of numbers written in the file (`tf.nn.softmax(tf.constant([[1., 2., 3.]]))`, a
        demo comparing a hand-written cross-entropy with TensorFlow's): nothing trains through it."""
        found = self.probabilities.probability(expr, frozenset())
        node = found.node if found is not None else None
        if isinstance(node, cst.Call) and self.ctx.call_name(node) in SOFTMAX | SIGMOID \
                and literal_numbers(self, arg(node, 0)):  # the function itself, not a layer (which has weights)
            return None
        return found

    def logits(self, expr: Optional[cst.BaseExpression]) -> Optional[cst.CSTNode]:
        """What makes `expr` logits (a layer without a squashing activation, a model ending in
        one, a matrix product), when it is logits and not a probability on any path."""
        return self.probabilities.logits(expr)

    def model_output(self, model: cst.BaseExpression) -> Optional[Source]:
        """The same, for what a model built in this module outputs (Sequential, functional, subclass)."""
        return self.probabilities.model_output(model)

    def differentiated(self) -> List[cst.BaseExpression]:
        """What training differentiates: `Gradients.targets`, and what each loss function a model
        is compiled with returns (`Probabilities.loss_functions`)."""
        returns = [r for function in self.probabilities.loss_functions() for r in self.returned(function)]
        return self.gradients.targets() + returns

    def trained_on(self, node: cst.CSTNode) -> bool:
        """Does training differentiate the value `node` makes (`differentiated`, `formulas.feeds`)?
        Memoised: a rule may ask twice of one node."""
        if node not in self._trained:
            self._trained[node] = feeds(self, node, self.differentiated())
        return self._trained[node]

    def in_forward_pass(self, node: cst.CSTNode) -> bool:
        """Is `node` in the `call` method of a class with a base (a Keras layer or model's forward
        pass, which the model's training differentiates)?"""
        function = next((a for a in self.ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
        if function is None or function.name.value != "call":
            return False
        block = self.ctx.parent.get(function)
        owner = self.ctx.parent.get(block) if block is not None else None  # the class, above the block
        return isinstance(owner, cst.ClassDef) and bool(owner.bases)

    def evaluated_only(self, node: cst.CSTNode) -> bool:
        """Does the module visibly not train on the value `node` makes? It differentiates
        something, this is not part of it, and it is computed in a function the module calls (a
        test step whose loss is logged). A helper nobody here calls may be trained by its
        importers: not this."""
        function = next((a for a in self.ctx.ancestors(node) if isinstance(a, cst.FunctionDef)), None)
        return function is not None and bool(self.call_sites(function)) and bool(self.differentiated()) \
            and not self.trained_on(node)

    def compiled(self) -> List[Compiled]:
        """Every model the file gives the loss it trains with (`model.compile(loss=...)` and the
        like; not a linked module's, whose findings are its own)."""
        return [compiled for compiled in self.probabilities.compiled() if compiled.call in self.ctx.own]
