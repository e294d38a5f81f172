"""Every claim a lesson makes about what a trace shows holds on the recording it refers to.

The claims are data beside the lesson text (``Lesson.claims``, ``lab.lessons.Claim``); this
module iterates all of them, so a new lesson's claims are tested without a line added here:
``device="cuda"`` claims on the lesson's H200 recordings in lab/samples/, ``device="cpu"`` ones on
a CPU run of the lesson made by the real engine (the session's ``cpu_lesson_runs``). Each
claim's words must be the lesson's own, verbatim, so a claim cannot drift from the sentence it
checks. ``RETRACTED`` holds sentences the lessons once said that were false, each as the claim
it made: it must fail on its recording and its words must be gone from every lesson.
"""

from __future__ import annotations

import pytest
from lessonruns import cpu_lesson_param, h200_runs

from lab.analysis.figures import FIGURES
from lab.lessons import LESSONS
from lab.lessons.attention import SDPA_BACKEND_OPS
from lab.lessons.schema import Claim, claim_between, claim_equals
from lab.teach.claims import all_claims, check_claim

CLAIMS = all_claims()
GPU_CLAIMS = [(k, c) for k, c in CLAIMS if c.device == "cuda"]
CPU_CLAIMS = [(k, c) for k, c in CLAIMS if c.device == "cpu"]


def _id(item) -> str:
    key, claim = item
    return f"{key}:{claim.says[:40]}"


def test_every_lesson_states_its_facts_as_claims():
    assert {k for k, _ in CLAIMS} == set(LESSONS), "a lesson without claims"
    assert len(GPU_CLAIMS) >= 40 and CPU_CLAIMS


@pytest.mark.parametrize("item", CLAIMS, ids=_id)
def test_a_claim_is_the_lessons_own_words_and_names_a_known_figure(item):
    key, claim = item
    lesson = LESSONS[key]
    assert claim.says in lesson.text or claim.says in lesson.explain, f"{key}: not said: {claim.says!r}"
    assert claim.figure in FIGURES
    assert claim.device in ("cuda", "cpu")
    for ref in (claim.run, claim.over):
        if ref is not None:
            other, _, name = ref.rpartition(":")
            assert name in [r.name for r in LESSONS[other or key].runs], f"{key}: no run {ref!r}"


@pytest.mark.parametrize("item", GPU_CLAIMS, ids=_id)
def test_claim_holds_on_the_h200_recording(item):
    key, claim = item
    check = check_claim(key, claim, h200_runs)
    assert check.holds, check.text


@pytest.mark.parametrize("item", [cpu_lesson_param(item[0], item, id=_id(item)) for item in CPU_CLAIMS])
def test_claim_holds_on_a_cpu_run(item, cpu_lesson_runs):
    key, claim = item
    check = check_claim(key, claim, lambda lesson: cpu_lesson_runs(lesson)[0])
    assert check.holds, check.text


# ----------------------------------------------------------- sentences the lessons once said that were false

# (the old words, the claim they made): each fails on its recording, and the words are gone.
RETRACTED: tuple[tuple[str, Claim], ...] = (
    # 1. math SDPA = written out: 14 kernels per step against 4.
    ("The math backend is the reference: the same kernels as the written-out version",
     claim_equals("", "kernels_per_step", "sdpa_backends:math", 4.0)),
    # 2. "picks a fused backend (FlashAttention or memory-efficient on GPUs)": cuDNN ran.
    ("FlashAttention or memory-efficient on GPUs",
     claim_equals("", "ops_present", "attention:sdpa", "aten::_flash_attention_forward", args=(SDPA_BACKEND_OPS,))),
    # 3. copies the written-out version hides: there are none (transposes are views).
    ("the copies (`aten::contiguous`, `aten::clone`, transposes) that the written-out version hides",
     claim_between("", "kernels_matching_per_step", "attention:written out", 1.0, float("inf"), args=("copy",))),
    # 4. the cold step's cost is the label → first-op gap: it is inside the first aten::mm and the
    #    profiler's buffers; the gap's growth is < 1 % of the step's.
    ("the gap between the start of the step label and its first operator in the first step",
     claim_between("", "label_gap_share_pct", "cold_vs_warm:cold", 50.0, 100.0)),
    # "several times faster" for TF32: 8.0×.
    ("several times faster", claim_between("", "gemm_kernel_us", "fp32_vs_tf32:float32", 2.0, 6.0,
                                           over="fp32_vs_tf32:tf32")),
    # "one long GEMM kernel" at 4096³: two kernels, the add 19.6 % of GPU time.
    ("is one long GEMM kernel", claim_equals("", "kernels_per_step", "tiny_vs_large:large", 1.0)),
    # FlashAttention "in one kernel" was right, but "the math backend ... same kernels" was not;
    # the bias "in the GEMM epilogue" on every device: on a CPU addmm copies the bias first.
)


@pytest.mark.parametrize("old, claim", RETRACTED, ids=[r[0][:40] for r in RETRACTED])
def test_the_false_sentences_of_issue_23_fail_on_their_recordings_and_are_gone(old, claim):
    check = check_claim("", claim, h200_runs)
    assert not check.holds, f"the retracted claim holds after all: {check.text}"
    for key, lesson in LESSONS.items():
        assert old not in lesson.text and old not in lesson.explain, f"{key} still says {old!r}"


def test_the_cpu_addmm_copies_its_bias_so_the_epilogue_claim_is_gpu_only(cpu_lesson_runs):
    """"cuBLAS applies the bias in the GEMM epilogue" is a GPU claim: on a CPU aten::addmm
    copies the broadcast bias into its output first (164 µs a step at 512³ on the H200 host)."""
    (linear,) = cpu_lesson_runs("linear")[0]
    claim = claim_equals("", "child_calls_per_step", "linear", 1.0, args=("aten::addmm", "aten::copy_"))
    assert check_claim("linear", claim, lambda _: [linear]).holds
    for lesson in LESSONS.values():
        for sentence in (lesson.text + " " + lesson.explain).split(". "):
            if "epilogue" in sentence:
                assert "GPU" in sentence or "cuBLAS" in sentence, f"{lesson.key}: epilogue without its device"


def test_the_tf32_switch_the_lesson_names_exists_in_the_installed_torch():
    """The lesson names both APIs: ``fp32_precision`` (torch ≥ 2.9) and the legacy switches."""
    import torch

    text = LESSONS["fp32_vs_tf32"].text
    assert 'fp32_precision = "tf32"' in text and "allow_tf32 = True" in text and "torch 2.9" in text
    major, minor = (int(p) for p in torch.__version__.split(".")[:2])
    has_new = hasattr(torch.backends.cuda.matmul, "fp32_precision")
    assert has_new == ((major, minor) >= (2, 9))
    assert hasattr(torch.backends.cuda.matmul, "allow_tf32")
