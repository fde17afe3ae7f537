"""The images against what KubeRay runs in them and what the GPU stack needs.

Parsed from the Dockerfiles (no Docker engine here): the runtime stage's base image,
its ``apt-get install`` packages, the ``pip install '.[extras]'`` of the build stage and
the Python version. Two checks:

- :func:`check_probe_tools`: every program of KubeRay's worker readiness probe (and
  llama.cpp's OpenMP runtime where llama.cpp is installed) is in the runtime stage;
- :func:`check_gpu_stack`: each image installs exactly one FAISS, the GPU image's CUDA
  base is the CUDA version PyPI's pinned torch was built for, and a GPU FAISS (if any)
  has the same CUDA major; both images run the same Python (Ray requires it).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ._common import CheckFailedError
from ._manifests import REPO

__all__ = [
    "KUBERAY_SOURCE",
    "TORCH_CUDA",
    "WORKER_READINESS_PROBE",
    "DockerImage",
    "check_gpu_stack",
    "check_probe_tools",
    "parse_dockerfile",
    "probe_programs",
]

KUBERAY_SOURCE = (
    "ray-project/kuberay v1.6.0 (unchanged in v1.7.0): ray-operator/controllers/ray/utils/"
    "constant.go (BaseWgetHealthCommand, RayAgentRayletHealthPath, RayServeProxyHealthPath, "
    "DefaultDashboardAgentListenPort 52365, DefaultServingPort 8000) and "
    "ray-operator/controllers/ray/common/pod.go (initLivenessAndReadinessProbe)"
)
# The readiness probe KubeRay >= 1.6 injects into a RayService's worker containers. With
# Ray >= 2.53 the liveness probe (and the head's readiness) is an HTTP GET of
# /api/healthz, but a RayService worker's readiness stays this exec probe, so that a pod
# whose Serve proxy is down leaves the serve Service: 52365 is the dashboard agent
# (the raylet's health), 8000 the container port named `serve`.
WORKER_READINESS_PROBE: tuple[str, ...] = (
    "bash",
    "-c",
    "wget --tries 1 -T 2 -q -O- http://localhost:52365/api/local_raylet_healthz | grep success"
    " && wget --tries 1 -T 10 -q -O- http://localhost:8000/-/healthz | grep success",
)

# Debian and Ubuntu images ship their Essential packages (bash, grep, coreutils...)
# even in -slim and CUDA base variants; other programs must be installed.
_ESSENTIAL = frozenset({"bash", "sh", "grep", "sed", "cat", "ls", "rm", "mkdir", "cp"})
_PACKAGE_OF = {"wget": "wget", "curl": "curl", "bash": "bash", "grep": "grep"}
# llama-cpp-python's libggml-cpu links libgomp.so.1 (OpenMP), which -slim lacks.
_LLAMACPP_RUNTIME = "libgomp1"

TORCH_CUDA: dict[str, str] = {"2.13.0": "13.0"}
"""CUDA version of PyPI's Linux x86_64 torch wheel (its ``torch.version.cuda``; the
2.13.0 wheel also requires ``cuda-toolkit==13.0.3``, and ``__version__`` reads
``2.13.0+cu130``). Extend when the pin moves."""

_FAISS_CUDA_MAJOR = re.compile(r"faiss-gpu-cu(\d+)")


@dataclass
class DockerImage:
    """What the checks need of one Dockerfile."""

    path: Path
    runtime_base: str
    runtime_packages: set[str] = field(default_factory=set)
    extras: set[str] = field(default_factory=set)
    pip_args: list[str] = field(default_factory=list)
    python: str | None = None

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def cuda(self) -> str | None:
        """The CUDA version of an ``nvidia/cuda:X.Y.Z-...`` base (X.Y), else None."""
        match = re.match(r"(?:docker\.io/)?nvidia/cuda:(\d+\.\d+)", self.runtime_base)
        return match[1] if match else None


def _instructions(text: str) -> list[tuple[str, str]]:
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            keyword, _, rest = stripped.partition(" ")
            out.append((keyword.upper(), rest.strip()))
    return out


def _commands(run: str) -> list[list[str]]:
    """The simple commands of a RUN line (split on &&, ;, |)."""
    tokens = shlex.split(run, posix=True)
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token in ("&&", ";", "|", "||"):
            commands.append([])
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _scan(image: DockerImage, command: list[str], *, runtime: bool) -> None:
    """Record what one RUN command installs."""
    # Program names without their directory; variable assignments dropped.
    words = [w.rsplit("/", 1)[-1] for w in command if "=" not in w or w.startswith("-")]
    if runtime and "apt-get" in words and "install" in words:
        after = words[words.index("install") + 1 :]
        image.runtime_packages |= {w for w in after if not w.startswith("-")}
    if "pip" in words and "install" in words:
        for word in command[command.index(next(w for w in command if w.endswith("install"))) :]:
            extras = re.fullmatch(r"\.\[([^\]]*)\]", word)
            if extras:
                image.extras |= {e.strip() for e in extras[1].split(",") if e.strip()}
            elif word.startswith("-") or "://" in word:
                image.pip_args.append(word)
    if words[:3] == ["uv", "python", "install"] and len(words) > 3:
        image.python = words[3]


def parse_dockerfile(path: Path) -> DockerImage:
    stages: list[tuple[str, list[tuple[str, str]]]] = []
    for keyword, rest in _instructions(path.read_text(encoding="utf-8")):
        if keyword == "FROM":
            stages.append((rest.split()[0], []))
        elif stages:
            stages[-1][1].append((keyword, rest))
    if not stages:
        raise CheckFailedError(f"{path.name}: no FROM")
    image = DockerImage(path=path, runtime_base=stages[-1][0])
    python = re.match(r"python:(\d+\.\d+\.\d+)", image.runtime_base)
    image.python = python[1] if python else None
    for index, (_base, instructions) in enumerate(stages):
        for keyword, rest in instructions:
            if keyword == "RUN":
                for command in _commands(rest):
                    _scan(image, command, runtime=index == len(stages) - 1)
    return image


def probe_programs(probe: tuple[str, ...] = WORKER_READINESS_PROBE) -> set[str]:
    """The programs a probe runs: its argv[0] and each command of its shell line."""
    programs = {probe[0]}
    if probe[:2] == ("bash", "-c"):
        programs |= {command[0] for command in _commands(probe[2])}
    return programs


def check_probe_tools(paths: list[Path] | None = None) -> list[str]:
    paths = paths or [REPO / "Dockerfile", REPO / "Dockerfile.gpu"]
    needed = probe_programs()
    problems, notes = [], []
    for path in paths:
        image = parse_dockerfile(path)
        missing = sorted(
            _PACKAGE_OF.get(p, p)
            for p in needed - _ESSENTIAL
            if _PACKAGE_OF.get(p, p) not in image.runtime_packages
        )
        if missing:
            problems.append(
                f"{image.name}: the runtime stage ({image.runtime_base}) lacks "
                f"{', '.join(missing)}, which KubeRay's worker readiness probe runs "
                f"({' '.join(shlex.quote(a) for a in WORKER_READINESS_PROBE)}): no worker "
                "pod would ever be Ready"
            )
        if "llamacpp" in image.extras and _LLAMACPP_RUNTIME not in image.runtime_packages:
            problems.append(
                f"{image.name}: installs the llamacpp extra but not {_LLAMACPP_RUNTIME} "
                "(libgomp.so.1) in its runtime stage: llama.cpp fails to import"
            )
        notes.append(f"{image.name}: runtime packages {', '.join(sorted(image.runtime_packages))}")
    if problems:
        raise CheckFailedError("\n".join(problems))
    return [
        f"KubeRay's worker readiness probe needs {', '.join(sorted(needed))} "
        f"(from {KUBERAY_SOURCE})",
        *notes,
    ]


def _pyproject(path: Path) -> dict[str, object]:
    with path.open("rb") as handle:
        return tomllib.load(handle)


def _faiss_requirements(requirements: list[str]) -> list[str]:
    return [r for r in requirements if r.replace("_", "-").lower().startswith("faiss")]


def check_gpu_stack(
    cpu_image: Path | None = None, gpu_image: Path | None = None, pyproject: Path | None = None
) -> list[str]:
    project = _pyproject(pyproject or REPO / "pyproject.toml")["project"]
    assert isinstance(project, dict)
    problems = []
    base_faiss = _faiss_requirements(list(project.get("dependencies", [])))
    if base_faiss:
        problems.append(
            f"pyproject.toml: FAISS in the base dependencies ({', '.join(base_faiss)}): an "
            "environment marker cannot exclude it when the gpu extra is chosen, so the "
            "`cpu` and `gpu` extras must carry it alone"
        )
    extras: dict[str, list[str]] = project.get("optional-dependencies", {})
    faiss_of = {name: _faiss_requirements(reqs) for name, reqs in extras.items()}
    for name in ("cpu", "gpu"):
        if len(faiss_of.get(name, [])) != 1:
            problems.append(f"pyproject.toml: extra `{name}` must hold exactly one FAISS")
    torch = next(
        (
            r.split("==")[1].strip()
            for r in project.get("dependencies", [])
            if r.startswith("torch==")
        ),
        None,
    )
    cpu = parse_dockerfile(cpu_image or REPO / "Dockerfile")
    gpu = parse_dockerfile(gpu_image or REPO / "Dockerfile.gpu")
    for image in (cpu, gpu):
        chosen = sorted(image.extras & {"cpu", "gpu"})
        if len(chosen) != 1:
            problems.append(
                f"{image.name}: installs the extras {sorted(image.extras)}: exactly one of "
                "`cpu` and `gpu` (one FAISS; both wheels write the same package)"
            )
    if not any("download.pytorch.org/whl/cpu" in a for a in cpu.pip_args) or cpu.cuda:
        problems.append(f"{cpu.name}: the CPU image should take torch's CPU build, on no CUDA base")
    torch_cuda = TORCH_CUDA.get(torch or "")
    if torch_cuda is None:
        problems.append(f"pyproject.toml: torch {torch}: its CUDA version is not in TORCH_CUDA")
    elif gpu.cuda != torch_cuda:
        problems.append(
            f"{gpu.name}: base {gpu.runtime_base} is CUDA {gpu.cuda}, but PyPI's torch {torch} "
            f"is a CUDA {torch_cuda} build: two CUDA runtimes, and the driver must serve the newer"
        )
    gpu_faiss = [r for e in sorted(gpu.extras) for r in faiss_of.get(e, [])]
    for requirement in gpu_faiss:
        major = _FAISS_CUDA_MAJOR.search(requirement)
        if major and gpu.cuda and major[1] != gpu.cuda.split(".")[0]:
            problems.append(
                f"{gpu.name}: {requirement} is built for CUDA {major[1]}, the image for CUDA "
                f"{gpu.cuda}: a second CUDA runtime in the image"
            )
    if cpu.python is None or cpu.python != gpu.python:
        problems.append(
            f"Python {cpu.python} in {cpu.name} but {gpu.python} in {gpu.name}: Ray refuses "
            "a cluster whose nodes run different Python versions"
        )
    if problems:
        raise CheckFailedError("\n".join(problems))
    return [
        f"{cpu.name}: extras {sorted(cpu.extras)}, torch CPU build, Python {cpu.python}",
        f"{gpu.name}: extras {sorted(gpu.extras)} (FAISS: {', '.join(gpu_faiss)}), base "
        f"{gpu.runtime_base} = CUDA {gpu.cuda} = PyPI torch {torch}, Python {gpu.python}",
    ]
