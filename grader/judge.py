"""Judge a submission's exercise: run the hidden checks' probe calls on the
submission and on the reference (each in its own sandboxed child), compare
the plain data that comes back, and turn each check into a :class:`Verdict`.

Verdicts are computed here, in the trusted process, from decoded results
only: nothing the child prints, writes or exits with can change them.

Calls are drawn per submission (grader/checks/inputs.py); the reference runs
on them too (grader/references.py). When a check fails, the same calls'
results of pitfall variants (the reference with one known mistake) are
compared with the submission's: a variant whose outputs there are the
submission's own *confirms* its pitfall (grader/matching.py: equal numbers
or errors, not merely the same failed property), and that hint is shown
first. Without a confirmed one, a pitfall the check declares is *possible*
(a guess, said as one) only when its variant fails the check with the same
signature and also fails the checks no confirmed mistake explains: at most
two. The comparison happens on the fixed inputs, where each variant runs
once per class, from a second run of the submission there; a variant
confirmed there runs on the submission's own inputs and must be confirmed
again (grader/suspects.py). Points rest on the submission's own inputs alone.
A figure measured from outside (CPU time, memory) that could not tell is
measured once more beside the reference's (grader/remeasure.py).

Feedback is fixed words (grader/feedback.py): no error message, exception
class name of the submission's own, printed output or warning reaches a
verdict's student-facing fields. A cause that broke the run (syntax error,
import error, missing name, timeout, memory, crash) is said once, in the
result's ``reason``, with the course's limit; the raw texts stay in
``instructor_detail`` / ``detail``.
"""
from __future__ import annotations

import copy
import functools
import threading
from dataclasses import replace
from pathlib import Path

from grader.checks import COULD_NOT_TELL, Check, CheckPlan, checks_for, counting, figures_for
from grader.checks.inputs import HiddenInputs
from grader.course import REPO_ROOT, Course, Exercise
from grader.failures import DETAIL_LIMIT, NOT_RUN, Failure, check_failure, run_where
from grader.figures import run_figures
from grader.feedback import Phrase, both, missing_names, run_cause, source_problem
from grader.course.pitfalls import load_variants
from grader import own_errors
from grader.matching import explain_by_confirmed
from grader.sandbox import RunResult, Sandbox
from grader.intake.submissions import assemble
from grader.remeasure import Remeasured, judged_again, measure_again, taking, undecided
from grader.references import InputSet, InputSets, check_batches, passing_seed, run_all, run_seeded
from grader.suspects import Seen, explain, reconfirmed
from grader.verdicts import ExerciseResult, Verdict  # noqa: F401 - imported from here by the grader's callers


class GraderError(Exception):
    """The grader cannot do its job (e.g. the reference fails its own checks)."""


def _check_points(exercise: Exercise, checks: list[Check]) -> dict[str, float]:
    total = sum(c.weight for c in checks)
    return {c.id: exercise.points * c.weight / total for c in checks}


# At least one of these must hold, or a submission could read the references
# and hidden checks: grading without them would be grading on trust.
FILESYSTEM_LAYERS = ("landlock", "filesystem_view")


def require_isolation(sandbox: Sandbox) -> None:
    """Raise :class:`GraderError` unless the sandbox hides the instructor's files."""
    layers = sandbox.layers()
    if not any(layers.get(name) == "active" for name in FILESYSTEM_LAYERS):
        missing = "; ".join(f"{name}: {layers.get(name, 'unknown')}" for name in FILESYSTEM_LAYERS)
        raise GraderError(f"the sandbox cannot hide solutions/ and the hidden checks here ({missing}); "
                          "run `grader doctor` for details")


class Judge:
    """Grades exercises of one course with one sandbox; reference and variant
    results are computed once per input set and shared between threads."""

    def __init__(self, course: Course, sandbox: Sandbox, root: Path = REPO_ROOT, inputs: HiddenInputs | None = None):
        """``inputs``: each submission's hidden inputs from the grading secret
        (grader/checks/inputs.py); None: fixed inputs, and no chosen shape or exception shown."""
        require_isolation(sandbox)
        self.course, self.sandbox, self.root, self.inputs = course, sandbox, root, inputs
        self.input_sets = InputSets()
        self._cache: dict[tuple[str, str], object] = {}
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self._lock = threading.Lock()

    def on_fixed_inputs(self) -> "Judge":
        """This judge with every submission on the checks' own inputs (as
        `grader check` grades), sharing its cached reference and variant runs."""
        fixed = copy.copy(self)   # shallow: the caches and their locks are the same objects
        fixed.inputs = None
        return fixed

    def _once(self, key: tuple[str, str], compute):
        """``compute()`` once per key, even when several threads ask at once."""
        with self._lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._cache:
                self._cache[key] = compute()
            return self._cache[key]

    def plan(self, exercise: Exercise) -> CheckPlan:
        """The exercise's checks and their hidden probe calls (built once)."""
        return self._once(("plan", exercise.id),
                          lambda: CheckPlan.build(checks_for(exercise), figures=figures_for(exercise)))

    def input_set(self, exercise: Exercise, seed: int | None = None) -> InputSet:
        """The plan on ``seed``'s hidden inputs (None: fixed), and its runs' results."""
        return self.input_sets.get(exercise.id, seed, lambda: self.plan(exercise) if seed is None else
                                   CheckPlan.build(checks_for(exercise), figures=figures_for(exercise), seed=seed))

    def expected(self, exercise: Exercise, workdir: Path, seed: int | None = None) -> RunResult:
        """The reference's results on the hidden calls (once per input set)."""
        inputs = self.input_set(exercise, seed)
        return inputs.once("reference", lambda: self._run_reference(exercise, inputs, workdir))

    def _run_reference(self, exercise: Exercise, inputs: InputSet, workdir: Path) -> RunResult:
        run = self._run_on(exercise, inputs, "reference", workdir)
        broken = [i for i, call in enumerate(run.calls) if not call.ok]
        if run.status != "ok" or len(run.calls) != len(inputs.plan.calls) or broken:
            detail = run.calls[broken[0]].error if broken else run.reason
            raise GraderError(f"the reference of {exercise.folder} fails its own hidden checks: {run.status}, {detail}")
        return run

    def _folder(self, exercise: Exercise, name: str, workdir: Path) -> Path:
        """The reference's (``name`` "reference") or a pitfall variant's folder, assembled once."""
        def assembled() -> Path:
            source = ((self.root / "solutions" / exercise.folder / exercise.module).read_bytes() if name == "reference"
                      else self._variants(exercise)[name].source.encode())
            tag = f"reference-{exercise.id}" if name == "reference" else f"variant-{exercise.id}-{name}"
            return assemble(exercise, source, workdir / tag, self.course, self.root)

        return self._once(("folder", f"{exercise.id}\0{name}"), assembled)   # the same for every input set

    def _run_on(self, exercise: Exercise, inputs: InputSet, name: str, workdir: Path) -> RunResult:
        """The reference (``name`` "reference") or a pitfall variant on ``inputs``."""
        run = functools.partial(self._run_unless_killed, self._folder(exercise, name, workdir), exercise.module_name)
        if inputs.seed is None:
            return run(inputs.plan.calls, check_batches(inputs.plan))
        self.input_sets.count(name)
        fixed = self.input_set(exercise)
        fixed_run = (lambda: self.expected(exercise, workdir)) if name == "reference" \
            else (lambda: self.variant_results(exercise, workdir, None, [name])[name])
        return run_seeded(inputs.plan, fixed.plan, fixed_run, run)

    def _run_unless_killed(self, folder: Path, module_name: str, calls: list, batches: list[int],
                           **limits: float) -> RunResult:
        """Every run the judge makes (the submission's, its second run, the reference's, a
        variant's), made again when the OOM killer, an operator's kill -9 or the sandbox's own
        server ended it, never the code (RunResult.ended_by): results are keyed by content, so
        every regrade would keep that accident, a reference's would stop the class. Once: a run
        ended again keeps that result."""
        run = self.sandbox.run(folder, module_name, calls, batches, **limits)
        return self.sandbox.run(folder, module_name, calls, batches, **limits) if run.from_outside else run

    def _measure_again(self, exercise: Exercise, folder: Path, workdir: Path, inputs: InputSet, check_ids: list[str],
                       run: RunResult, expected: RunResult) -> Remeasured:
        """The measured checks' calls made again for ``check_ids``, which could not tell: the
        submission's then the reference's (grader/remeasure.py), the submission's within the
        second run's clock."""
        def runner(folder: Path, **limits: float):
            def measured(calls: list, batches: list[int]) -> RunResult:
                self.input_sets.count("measured again")
                return self._run_unless_killed(folder, exercise.module_name, calls, batches, **limits)
            return measured

        return measure_again(inputs.plan, check_ids, run, expected, runner(folder, timeout_s=second_run_clock(run)),
                             runner(self._folder(exercise, "reference", workdir)))

    def variant_results(self, exercise: Exercise, workdir: Path, seed: int | None = None,
                        names: list[str] | None = None) -> dict[str, RunResult]:
        """The pitfall variants' (``names``, default all) results on the hidden
        calls, each once per input set; asked only when a check fails with a mistake to explain."""
        inputs = self.input_set(exercise, seed)
        return run_all({name: functools.partial(inputs.once, f"variant {name}", functools.partial(
            self._run_on, exercise, inputs, name, workdir)) for name in (self._variants(exercise) if names is None else names)})

    def _variants(self, exercise: Exercise) -> dict:
        return self._once(("variant_sources", exercise.id), lambda: load_variants(exercise, self.root))

    def grade(self, exercise: Exercise, folder: Path | None, workdir: Path, variant: str | None = None) -> ExerciseResult:
        """Grade the exercise module in ``folder`` (None: not submitted).

        ``variant``: ``folder`` holds that pitfall variant's own code (the
        proofs of `grader check`), so its run on these inputs is the one the
        judge already keeps to compare against, and is not run again."""
        plan = self.plan(exercise)
        if not plan.checks:
            raise GraderError(f"{exercise.folder} has no hidden checks (grader/checks/{exercise.slug}.py)")
        points = _check_points(exercise, plan.checks)
        if folder is None or not (folder / exercise.module).is_file():
            # The status says it all; each check just says it did not run.
            verdicts = [Verdict(c.id, False, 0.0, points[c.id], c.message, "not submitted", kind="not_run")
                        for c in plan.checks]
            return ExerciseResult(exercise.id, "not_submitted", "", verdicts, exercise.points)
        # Read before the run: source rules judge the bytes as collected, and
        # the hidden inputs are drawn from them (grader/checks/inputs.py).
        source = _read_source(folder / exercise.module)
        seed = passing_seed(self.inputs.seed(exercise.id, source) if self.inputs else None,
                            lambda seed: self.expected(exercise, workdir, seed), GraderError)
        inputs = self.input_set(exercise, seed)
        plan = inputs.plan
        if variant is not None:   # made again if killed, as every variant's run is (_run_on)
            run = self.variant_results(exercise, workdir, inputs.seed, [variant])[variant]
        else:
            run = self._run_unless_killed(folder, exercise.module_name, plan.calls, check_batches(plan))
        expected = self.expected(exercise, workdir, inputs.seed)   # run already, by passing_seed
        limits = getattr(self.sandbox, "limits", None)
        verdicts: list[Verdict] = []
        detail = " ".join(run.reason.split())[:DETAIL_LIMIT] if run.status != "ok" else ""
        # Parsed only where it can matter: a call that raised AttributeError.
        missing = self._missing_names(exercise, source) if any(
            not call.ok and call.error_type == "AttributeError" for call in run.calls) else []
        # The student's shapes and exception names only where inputs change with every submission.
        def judged(check: Check, run: RunResult, expected: RunResult) -> Failure | None:
            return check_failure(check, plan.slices[check.id], run, expected, source, limits, plan.calls,
                                 reveal=inputs.seed is not None and not (check.fixed_inputs or check.anchored))

        failures = {check.id: judged(check, run, expected) for check in plan.checks}
        voiding, voided_in = None, ""   # a later run of the submission that tampered voids its grade
        if ids := undecided(failures):   # a figure too near its threshold: measured again, beside the reference's
            again = self._measure_again(exercise, folder, workdir, inputs, ids, run, expected)
            if again.whole:
                failures.update({check.id: judged_again(failures[check.id], judged(check, again.run, again.expected))
                                 for check in plan.checks if check.id in ids})
                # What follows (hints, replays, figures) reads the new calls only where a verdict came from them.
                run, expected = taking(plan, ids, run, again.run), taking(plan, ids, expected, again.expected)
            if again.again.status == "tampered":
                voiding, voided_in = again.again, "in the measured calls made again: "
        # A raised exception told where, on what, and its message, from a replay on ungraded inputs.
        failures = own_errors.explain(self.sandbox, folder, exercise.module_name, plan, run, failures,
                                      per_submission=inputs.seed is not None)
        if missing:   # an AttributeError of a name the stub defines and the submission does not
            failures = {check_id: Failure("missing_name", NOT_RUN, failure.detail)
                        if failure is not None and failure.kind == "raised AttributeError" else failure
                        for check_id, failure in failures.items()}
        passed = {check_id for check_id, failure in failures.items() if failure is None}
        seen = Seen(inputs, run, expected, failures, passed)
        home, where = None if voiding else self._home(exercise, folder, workdir, seen, source, limits), True
        if home is not None and home.run.status == "tampered":
            voiding, voided_in = home.run, "in the second run, on the fixed inputs: "
        if voiding is not None:   # its second run, or a measurement made again, voids the first
            run = replace(voiding, calls=[])
            detail = (voided_in + " ".join(run.reason.split()))[:DETAIL_LIMIT]   # its call numbers are that run's
            failures = {check.id: check_failure(check, plan.slices[check.id], run, expected, source, limits)
                        for check in plan.checks}
            passed, home, where = set(), None, False   # its call there would tell of the fixed inputs
            seen = Seen(inputs, run, expected, failures, passed)
        # A check counts when it passes and so does every check it requires
        # (in any order: the requirement is that behaviour, not its points).
        counts = counting(plan.checks, passed)   # requirements hold through every link
        for check in plan.checks:
            failure = failures[check.id]
            unmet = [r for r in check.requires if r not in counts]
            if failure is None and unmet:
                verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message,
                                        f"counts once {', '.join(unmet)} passes", kind="requires"))
                continue
            if failure is None:
                verdicts.append(Verdict(check.id, True, points[check.id], points[check.id], check.message))
                continue
            if failure.kind in NO_MISTAKE_TO_EXPLAIN:  # a stub, a missing name, a broken run
                verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message, failure.reason,
                                        kind=failure.kind, instructor_detail=failure.detail or detail))
                continue
            confirmed, possible = self._suspects(exercise, seen, check, failure, workdir, home)
            verdicts.append(Verdict(check.id, False, 0.0, points[check.id], check.message, failure.reason,
                                    [*confirmed, *possible], confirmed, possible, failure.kind, failure.detail))
        explain_by_confirmed(verdicts)
        figures = run_figures(plan, run, expected)
        cause = self._cause(exercise, plan, run, limits, source, missing, where)
        if run.status == "ok":
            status = "not_started" if _not_started(verdicts) else "graded"
            return ExerciseResult(exercise.id, status, cause, verdicts, exercise.points, figures, detail)
        return ExerciseResult(exercise.id, run.status, cause, verdicts, exercise.points, figures, detail)

    def _suspects(self, exercise: Exercise, seen: Seen, check: Check, failure: Failure, workdir: Path,
                  home: Seen | None) -> tuple[list[str], list[str]]:
        """(confirmed, possible) pitfalls of a failed check (grader/suspects.py). ``home``: the
        submission's run on the fixed inputs, where every variant has run once per class; None on
        the fixed inputs themselves. The analysis happens there when the check fails there too,
        and only the variants it confirms run on the submission's own inputs, to confirm them
        again; otherwise the variants failing alike run on them, a few a submission."""
        every = self.variant_results(exercise, workdir)
        fixed, fixed_expected = self.input_set(exercise), self.expected(exercise, workdir)
        pitfalls, catalogued = [p.id for p in exercise.pitfalls], set(every)
        there = home.failures.get(check.id) if home is not None else None
        if home is not None and there is not None and there.kind not in NO_MISTAKE_TO_EXPLAIN:
            alike = fixed.alike(check, there.kind, every, fixed_expected)
            confirmed, possible = explain(self.course, pitfalls, home, check, there,
                                          {p: every[p] for p in alike}, catalogued)
            if not confirmed:
                return [], possible
            names = seen.inputs.budgeted(confirmed, check.pitfalls)
            variants = self.variant_results(exercise, workdir, seen.inputs.seed, names)
            return reconfirmed(self.course, pitfalls, seen, check, failure, confirmed, variants, catalogued)
        alike = fixed.alike(check, failure.kind, every, fixed_expected)
        variants = self.variant_results(exercise, workdir, seen.inputs.seed, seen.inputs.budgeted(alike, check.pitfalls))
        return explain(self.course, pitfalls, seen, check, failure, variants, catalogued)

    def _home(self, exercise: Exercise, folder: Path, workdir: Path, seen: Seen, source: bytes | None,
              limits: object | None) -> Seen | None:
        """The submission's run on the fixed inputs, for :meth:`_suspects`: only on its own
        inputs, and only when a check fails with a mistake to explain. The calls that differ
        from its own inputs' run; the rest (a copy task's training) are taken from ``seen``.
        Not for a run that broke (a timeout, a crash): a second would cost the class its limit again."""
        if seen.inputs.seed is None or seen.run.status != "ok" or not any(
                failure is not None and failure.kind not in NO_MISTAKE_TO_EXPLAIN for failure in seen.failures.values()):
            return None
        fixed, expected = self.input_set(exercise), self.expected(exercise, workdir)
        self.input_sets.count("submission")
        run = run_seeded(fixed.plan, seen.inputs.plan, lambda: seen.run, functools.partial(
            self._run_unless_killed, folder, exercise.module_name, timeout_s=second_run_clock(seen.run)))
        plan = fixed.plan
        failures = {check.id: check_failure(check, plan.slices[check.id], run, expected, source, limits, plan.calls,
                                            reveal=False) for check in plan.checks}
        return Seen(fixed, run, expected, failures, {check_id for check_id, f in failures.items() if f is None})

    def _missing_names(self, exercise: Exercise, source: bytes | None) -> list[str]:
        """The stub's public names that the submission does not define
        (parsed here, never executed)."""
        stub = self.root / "exercises" / exercise.folder / exercise.module
        if source is None or not stub.is_file():
            return []
        return missing_names(source, stub.read_bytes())

    def _cause(self, exercise: Exercise, plan: CheckPlan, run: RunResult, limits: object | None,
               source: bytes | None, missing: list[str], say_where: bool = True) -> str:
        """The one cause that kept checks from running, in both languages
        (empty when every check ran and no name was missing)."""
        if run.status == "ok" and len(run.calls) >= len(plan.calls):
            if missing:  # only ever found when a call raised AttributeError (grade)
                names = ", ".join(repr(name) for name in missing)
                return both(f"{exercise.module} defines no {names} at its top level (check the name's spelling); "
                            f"the checks that need it could not run",
                            f"{exercise.module} 的顶层没有定义 {names}（检查名字的拼写）；需要它的检查无法运行")
            return ""
        problem = source_problem(source, exercise.module) if source is not None else None
        where = run_where(run, plan, exercise) if say_where else Phrase(en="", zh="")
        cause = run_cause(run.status, run.reason, limits=limits, where=where, problem=problem,
                          module=exercise.module)
        return both(cause.en, cause.zh)


# The second run, on the fixed inputs, for hints only (Judge._home): at most
# this many times the first run's wall clock, or the floor, within the course's limit.
SECOND_RUN_FACTOR = 3
SECOND_RUN_FLOOR_S = 5.0


def second_run_clock(first: RunResult) -> float:
    """The wall clock of a later run of the submission (its second run, its measured calls made
    again): its own first run's time is the measure, so code that hangs there alone costs the
    class little (the sandbox keeps it within the course's limit)."""
    return max(SECOND_RUN_FACTOR * first.wall_s, SECOND_RUN_FLOOR_S)

# Failures that point at no mistake: a hint would be noise.
NO_MISTAKE_TO_EXPLAIN = {"not_implemented", "not_run", "missing_name", "memory", "protocol", "tampered", COULD_NOT_TELL}
SOURCE_LIMIT = 4 << 20


def _read_source(path: Path) -> bytes | None:
    """The submitted module's bytes (bounded; intake has checked its size)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(SOURCE_LIMIT)
    except OSError:
        return None


def _not_started(verdicts: list[Verdict]) -> bool:
    """An untouched stub: nothing passed, and every check either raised
    NotImplementedError or waits for one that did."""
    return not any(v.passed for v in verdicts) and all(v.kind in ("not_implemented", "requires") for v in verdicts) \
        and any(v.kind == "not_implemented" for v in verdicts)
