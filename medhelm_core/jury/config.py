"""A jury run described as plain, hashable data, as HELM describes a run by its spec.

:class:`JudgeSpec` is one judge (a litellm model name and how to reach it); :class:`JuryConfig` is the
whole jury (judges, prompt template, rubric and the retry policy). The part of it that decides what a
verdict *is* (judge models, temperatures, prompt template, rubric) is hashed: that hash names the run and,
per item and judge, keys the verdict cache. How a run is *executed* (API base, concurrency, timeouts,
retries, output-token limit) can change between a run and its resumption without invalidating anything.

Which versions a run used is recorded beside: the rubric's version is inside the rubric (and so in the
hash), the prompt template's name and version (:mod:`medhelm_core.jury.templates`) are labels outside the
hash, which is taken over the template's text, so two versions with the same text share cached verdicts.

API keys are never part of a config: a judge names the environment variable that holds its key
(``api_key_env``), and litellm reads the provider's usual variable (``OPENAI_API_KEY`` ...) otherwise.
Streamlit's root-level secrets are exported to the environment by Streamlit, so they work the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from medhelm_core.db.models import RunSource
from medhelm_core.errors import InputFileError, ValidationError
from medhelm_core.jury.prompt import DEFAULT_TEMPLATE, DEFAULT_TEMPLATE_NAME, check_template
from medhelm_core.rubric import RubricSpec

if TYPE_CHECKING:
    from medhelm_core.jury.templates import TemplateVersion

#: MedHELM's judge settings: temperature 0, up to 4,096 output tokens.
DEFAULT_TEMPERATURE = 0.0
DEFAULT_MAX_TOKENS = 4096
DEFAULT_CONCURRENCY = 8
DEFAULT_TIMEOUT_SECONDS = 120.0

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_WORDS = re.compile(r"key|token|secret|password|sig", re.IGNORECASE)
_JUDGE_KEYS = {"model", "api_base", "api_key_env", "temperature", "max_tokens", "concurrency", "timeout"}
_FILE_KEYS = {"name", "judges", "temperature", "max_tokens", "concurrency", "timeout", "max_retries",
              "retry_base_seconds", "retry_max_seconds", "prompt_template", "prompt_file"}


def sha256_json(value: Any) -> str:
    """The SHA-256 of ``value`` as canonical JSON (sorted keys): stable across processes and versions."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


MAX_SAMPLES = 10


def check_samples(samples: Any) -> int:
    """``samples`` as an int between 1 and :data:`MAX_SAMPLES`, or a clear :class:`ValidationError`.

    Examples
    --------
    >>> check_samples(3)
    3
    """
    try:
        value = int(samples)
    except (TypeError, ValueError):
        raise ValidationError(f"samples must be a whole number from 1 to {MAX_SAMPLES}, not {samples!r}") from None
    if value != samples or not 1 <= value <= MAX_SAMPLES:
        raise ValidationError(f"samples must be a whole number from 1 to {MAX_SAMPLES} (repeated calls per item "
                              f"and judge), not {samples!r}")
    return value


def samples_warning(config: JuryConfig) -> str | None:
    """A warning when repeated samples will likely be identical (a judge at temperature 0), else None."""
    if config.samples <= 1:
        return None
    cold = [j.model for j in config.judges if j.temperature == 0]
    if not cold:
        return None
    return (f"samples = {config.samples} with temperature 0 ({', '.join(cold)}): the samples will likely be "
            "identical; raise the temperature to measure self-consistency")


def check_api_base(api_base: str | None) -> str | None:
    """Refuse an API base that carries credentials, since the config (and so the URL) is stored."""
    if api_base is None or not api_base.strip():
        return None
    url = api_base.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValidationError(f"API base {url!r} must be an http:// or https:// URL")
    if parts.username or parts.password:
        raise ValidationError(
            "the API base must not contain a user name or password; put the key in an environment variable"
        )
    if any(_SECRET_WORDS.search(name) for name, _ in parse_qsl(parts.query)):
        raise ValidationError(
            "the API base must not carry a key in its query string; put the key in an environment variable"
        )
    return url.rstrip("/")


@dataclass(frozen=True)
class JudgeSpec:
    """One judge model and how to reach it.

    Parameters
    ----------
    model
        A litellm model name, e.g. ``openai/gpt-4o-2024-05-13``, ``anthropic/claude-3-7-sonnet-20250219``,
        ``ollama/llama3.3`` or ``openai/<name>`` for any OpenAI-compatible server.
    api_base
        The server's URL (a local vLLM, Ollama or OpenAI-compatible endpoint); None for the provider's.
    api_key_env
        The *name* of the environment variable holding the key; None to let litellm use the provider's
        usual variable. The key itself is never stored.
    temperature, max_tokens
        Sampling settings (MedHELM: 0 and 4,096).
    concurrency
        At most this many calls to this judge at once.
    timeout
        Seconds before one call is abandoned (and retried).
    """

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = DEFAULT_TEMPERATURE
    max_tokens: int = DEFAULT_MAX_TOKENS
    concurrency: int = DEFAULT_CONCURRENCY
    timeout: float = DEFAULT_TIMEOUT_SECONDS

    def __post_init__(self) -> None:
        model = self.model.strip() if isinstance(self.model, str) else ""
        if not model or any(ch.isspace() for ch in model):
            raise ValidationError(f"judge model {self.model!r} must be a litellm model name such as openai/gpt-4o")
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "api_base", check_api_base(self.api_base))
        if self.api_key_env is not None and not _ENV_NAME.match(self.api_key_env):
            raise ValidationError(
                f"api_key_env must be the name of an environment variable, not {self.api_key_env!r}"
            )
        if not 0.0 <= float(self.temperature) <= 2.0:
            raise ValidationError(f"judge {model}: temperature {self.temperature} must be between 0 and 2")
        object.__setattr__(self, "temperature", float(self.temperature))
        if int(self.max_tokens) < 16:
            raise ValidationError(f"judge {model}: max_tokens {self.max_tokens} is too small for a verdict")
        if not 1 <= int(self.concurrency) <= 1000:
            raise ValidationError(f"judge {model}: concurrency must be between 1 and 1000")
        if not float(self.timeout) > 0:
            raise ValidationError(f"judge {model}: timeout must be a positive number of seconds")

    def to_dict(self) -> dict[str, Any]:
        """Plain data for storage: the env variable's name at most, never a key."""
        return {
            "model": self.model,
            "api_base": self.api_base,
            "api_key_env": self.api_key_env,
            "temperature": self.temperature,
            "max_tokens": int(self.max_tokens),
            "concurrency": int(self.concurrency),
            "timeout": float(self.timeout),
        }


def rubric_to_dict(rubric: RubricSpec) -> dict[str, Any]:
    """The rubric as plain data, anchors included (they are part of the prompt a judge sees)."""
    return {
        "name": rubric.name,
        "version": rubric.version,
        "title": rubric.title,
        "description": rubric.description,
        "criteria": [
            {
                "name": c.name,
                "label": c.label,
                "description": c.description,
                "scale": [c.scale_min, c.scale_max],
                "anchors": {str(k): v for k, v in sorted(c.anchors.items())},
            }
            for c in rubric.criteria
        ],
    }


@dataclass(frozen=True)
class JuryConfig:
    """A jury: its judges, the prompt template, the rubric, and how failed calls are retried.

    ``prompt_name`` and ``prompt_version`` say which stored template version ``prompt_template`` is (a
    version 0 or None: text not stored as a version); the bundled template is ``medhelm`` v1 without being
    told. They are recorded with the run but stay out of :attr:`config_hash`, which is over the text.

    Examples
    --------
    >>> from medhelm_core.rubric import default_rubric
    >>> cfg = JuryConfig(judges=(JudgeSpec("openai/gpt-4o"),), rubric=default_rubric())
    >>> len(cfg.config_hash), cfg.prompt_label
    (64, 'medhelm v1')
    """

    judges: tuple[JudgeSpec, ...]
    rubric: RubricSpec
    prompt_template: str = DEFAULT_TEMPLATE
    name: str = ""
    max_retries: int = 4
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 30.0
    prompt_name: str = ""
    prompt_version: int | None = None
    #: how many times each judge is asked about each item (repeated samples, for self-consistency)
    samples: int = 1

    def __post_init__(self) -> None:
        check_samples(self.samples)
        object.__setattr__(self, "samples", int(self.samples))
        if not self.prompt_name and self.prompt_version is None and self.prompt_template == DEFAULT_TEMPLATE:
            object.__setattr__(self, "prompt_name", DEFAULT_TEMPLATE_NAME)
            object.__setattr__(self, "prompt_version", 1)
        if self.prompt_version is not None and int(self.prompt_version) < 1:
            raise ValidationError(f"prompt version {self.prompt_version} must be 1 or more")
        judges = tuple(self.judges)
        if not judges:
            raise ValidationError("a jury needs at least one judge (--judge MODEL)")
        models = [j.model for j in judges]
        repeated = sorted({m for m in models if models.count(m) > 1})
        if repeated:
            raise ValidationError(f"judge {repeated[0]} is given twice; each judge model may appear once")
        object.__setattr__(self, "judges", judges)
        check_template(self.prompt_template)
        if not 0 <= int(self.max_retries) <= 20:
            raise ValidationError("max_retries must be between 0 and 20")
        if self.retry_base_seconds < 0 or self.retry_max_seconds < self.retry_base_seconds:
            raise ValidationError("retry back-off must satisfy 0 <= retry_base_seconds <= retry_max_seconds")

    @property
    def template_hash(self) -> str:
        """SHA-256 of the prompt template text."""
        return hashlib.sha256(self.prompt_template.encode()).hexdigest()

    @property
    def rubric_hash(self) -> str:
        """SHA-256 of the rubric's criteria, scales and anchors."""
        return sha256_json(rubric_to_dict(self.rubric))

    @property
    def config_hash(self) -> str:
        """The hash of what decides a verdict: judge models and temperatures, template and rubric.

        Judge order does not matter; API bases, concurrency, timeouts and retries do not enter it, so a
        run resumed with other execution settings is the same run. ``samples`` enters it only when it is
        more than 1, so the hash of a one-sample jury is what it was before samples existed.
        """
        decided: dict[str, Any] = {
            "judges": sorted([j.model, j.temperature] for j in self.judges),
            "prompt_template": self.template_hash,
            "rubric": self.rubric_hash,
        }
        if self.samples != 1:
            decided["samples"] = self.samples
        return sha256_json(decided)

    @property
    def prompt_label(self) -> str:
        """Which template version the judges get: ``medhelm v2``, or ``custom (not stored)``."""
        if self.prompt_version is None:
            return f"{self.prompt_name or 'custom'} (not stored)"
        return f"{self.prompt_name} v{self.prompt_version}"

    @property
    def versions(self) -> dict[str, Any]:
        """The versions this jury uses, as stored with its run: rubric and prompt template."""
        return {
            "rubric_name": self.rubric.name,
            "rubric_version": self.rubric.version,
            "prompt_name": self.prompt_name or None,
            "prompt_version": self.prompt_version,
            "prompt_template_hash": self.template_hash,
        }

    def with_template(self, template: TemplateVersion) -> JuryConfig:
        """A copy whose judges get ``template`` (a stored version): its text, name and version."""
        return replace(self, prompt_template=template.text, prompt_name=template.name,
                       prompt_version=template.version)

    def judge(self, model: str) -> JudgeSpec:
        """The judge with this model name."""
        for j in self.judges:
            if j.model == model:
                return j
        raise ValidationError(f"this jury has no judge {model!r}")

    def display_name(self) -> str:
        """The run's name: the one given, else its judges."""
        if self.name.strip():
            return self.name.strip()[:200]
        temps = {j.temperature for j in self.judges}
        suffix = f" (temperature {temps.pop():g})" if len(temps) == 1 else ""
        return (" + ".join(j.model for j in self.judges) + suffix)[:200]

    def to_dict(self) -> dict[str, Any]:
        """Plain data stored as ``JuryRun.config``: everything needed to resume the run, and no keys."""
        return {
            "source": RunSource.litellm.value,
            "name": self.display_name(),
            "judges": [j.to_dict() for j in self.judges],
            "prompt_template": self.prompt_template,
            "prompt_template_hash": self.template_hash,
            "prompt_name": self.prompt_name or None,
            "prompt_version": self.prompt_version,
            "rubric": rubric_to_dict(self.rubric),
            "rubric_hash": self.rubric_hash,
            "max_retries": int(self.max_retries),
            "retry_base_seconds": float(self.retry_base_seconds),
            "retry_max_seconds": float(self.retry_max_seconds),
            "samples": int(self.samples),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], rubric: RubricSpec) -> JuryConfig:
        """Rebuild a config stored with :meth:`to_dict` (to resume a run) on ``rubric``, the version it used
        (see :func:`medhelm_core.jury.run_versions.stored_config`)."""
        version = data.get("prompt_version")
        return cls(
            judges=tuple(JudgeSpec(**{k: v for k, v in j.items() if k in _JUDGE_KEYS}) for j in data["judges"]),
            rubric=rubric,
            prompt_template=data.get("prompt_template", DEFAULT_TEMPLATE),
            name=data.get("name", ""),
            max_retries=int(data.get("max_retries", 4)),
            retry_base_seconds=float(data.get("retry_base_seconds", 1.0)),
            retry_max_seconds=float(data.get("retry_max_seconds", 30.0)),
            prompt_name=str(data.get("prompt_name") or ""),
            prompt_version=int(version) if version is not None else None,
            samples=int(data.get("samples", 1)),
        )

    def with_execution(self, **changes: Any) -> JuryConfig:
        """A copy with execution settings (``concurrency``, ``timeout``, ``max_tokens``, ``api_base``)
        changed for every judge; the config hash stays the same."""
        allowed = {"concurrency", "timeout", "max_tokens", "api_base"}
        unknown = set(changes) - allowed
        if unknown:
            raise ValidationError(f"cannot change {', '.join(sorted(unknown))} of a stored jury")
        given = {k: v for k, v in changes.items() if v is not None}
        return replace(self, judges=tuple(replace(j, **given) for j in self.judges))


def stored_prompt(data: dict[str, Any]) -> tuple[str | None, int | None]:
    """The (template name, version) a stored run config names; (None, None) when it names none.

    A config stored before versions were recorded names none, but if its text is the bundled template's,
    it is ``medhelm`` v1 all the same.

    Examples
    --------
    >>> stored_prompt({"prompt_template": DEFAULT_TEMPLATE}), stored_prompt({"prompt_template": "$criteria"})
    (('medhelm', 1), (None, None))
    """
    version = data.get("prompt_version")
    if data.get("prompt_name") or version is not None:
        return (data.get("prompt_name") or None), (int(version) if version is not None else None)
    if data.get("prompt_template") == DEFAULT_TEMPLATE:
        return DEFAULT_TEMPLATE_NAME, 1
    return None, None


@dataclass(frozen=True)
class JuryFile:
    """What a ``jury.toml`` holds before it meets a study's rubric: judges, defaults and a template."""

    judges: tuple[JudgeSpec, ...] = ()
    name: str = ""
    prompt_template: str = DEFAULT_TEMPLATE
    max_retries: int = 4
    retry_base_seconds: float = 1.0
    retry_max_seconds: float = 30.0
    defaults: tuple[tuple[str, Any], ...] = ()
    #: where the file's own template came from (``prompt_template`` or the prompt file's path); empty: none
    prompt_source: str = ""


def load_jury_file(path: str | Path) -> JuryFile:
    """Read a ``jury.toml``: top-level defaults, ``[[judges]]`` tables and an optional prompt template.

    Example file::

        name = "three vendors"
        temperature = 0.0          # defaults for every judge below
        max_tokens = 4096
        concurrency = 8
        timeout = 120
        # prompt_file = "my_prompt.txt"   (or prompt_template = '''...''')

        [[judges]]
        model = "openai/gpt-4o-2024-05-13"

        [[judges]]
        model = "openai/llama-3.3-70b-instruct"
        api_base = "http://127.0.0.1:8000/v1"
        api_key_env = "VLLM_API_KEY"
        concurrency = 4

    Keys are refused in the file: a judge names the environment variable with ``api_key_env``.
    """
    p = Path(path)
    if not p.is_file():
        raise InputFileError(p, "no such jury config file")
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise InputFileError(p, f"not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(p, f"cannot parse: {exc}") from None
    _refuse_keys(data, p)
    unknown = set(data) - _FILE_KEYS
    if unknown:
        raise InputFileError(p, f"unknown setting {sorted(unknown)[0]!r}", field=sorted(unknown)[0])
    defaults = {k: data[k] for k in ("temperature", "max_tokens", "concurrency", "timeout") if k in data}
    judges: list[JudgeSpec] = []
    raw_judges = data.get("judges", [])
    if not isinstance(raw_judges, list):
        raise InputFileError(p, "'judges' must be a list of [[judges]] tables", field="judges")
    for i, raw in enumerate(raw_judges):
        where = f"judges[{i}]"
        if not isinstance(raw, dict) or "model" not in raw:
            raise InputFileError(p, "each judge needs a model", field=where)
        unknown = set(raw) - _JUDGE_KEYS
        if unknown:
            raise InputFileError(p, f"unknown judge setting {sorted(unknown)[0]!r}", field=where)
        try:
            judges.append(JudgeSpec(**{**defaults, **raw}))
        except (ValidationError, TypeError) as exc:
            raise InputFileError(p, str(exc), field=where) from None
    template, source = DEFAULT_TEMPLATE, ""
    if "prompt_template" in data and "prompt_file" in data:
        raise InputFileError(p, "give prompt_template or prompt_file, not both")
    if "prompt_template" in data:
        template, source = str(data["prompt_template"]), f"prompt_template in {p.name}"
    elif "prompt_file" in data:
        tpath = (p.parent / str(data["prompt_file"])).resolve()
        if not tpath.is_file():
            raise InputFileError(p, f"prompt file {tpath} does not exist", field="prompt_file")
        template, source = tpath.read_text(encoding="utf-8"), f"prompt file {tpath.name}"
    try:
        check_template(template)
    except ValidationError as exc:
        raise InputFileError(p, str(exc), field="prompt_template") from None
    return JuryFile(
        judges=tuple(judges),
        name=str(data.get("name", "")),
        prompt_template=template,
        max_retries=int(data.get("max_retries", 4)),
        retry_base_seconds=float(data.get("retry_base_seconds", 1.0)),
        retry_max_seconds=float(data.get("retry_max_seconds", 30.0)),
        defaults=tuple(sorted(defaults.items())),
        prompt_source=source,
    )


def _refuse_keys(data: Any, path: Path, where: str = "") -> None:
    """A key written into a config file would end up stored with the run; refuse it at the boundary."""
    if isinstance(data, dict):
        for k, v in data.items():
            if k in ("api_key", "key", "token", "secret", "password") or k.endswith("_api_key"):
                raise InputFileError(
                    path,
                    "API keys are not read from jury.toml; set the key in an environment variable and "
                    "name it with api_key_env",
                    field=f"{where}{k}",
                )
            _refuse_keys(v, path, f"{where}{k}.")
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _refuse_keys(v, path, f"{where.rstrip('.')}[{i}].")


def build_config(
    rubric: RubricSpec,
    judges: list[str] | tuple[str, ...] = (),
    *,
    jury_file: JuryFile | None = None,
    api_base: str | None = None,
    api_key_env: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    concurrency: int | None = None,
    timeout: float | None = None,
    name: str | None = None,
    template: TemplateVersion | None = None,
    samples: int | None = None,
) -> JuryConfig:
    """Combine a jury file and judges named on the command line or the page into one :class:`JuryConfig`.

    Settings given here override the file's top-level defaults and apply to the judges named here; a
    judge's own settings in the file stay as written. ``template`` is the stored template version the
    judges get, in place of the file's template (or the bundled one). ``samples`` (1 to 10, default 1) is how
    many times each judge is asked about each item.
    """
    file = jury_file or JuryFile()
    defaults: dict[str, Any] = dict(file.defaults)
    given = {"temperature": temperature, "max_tokens": max_tokens, "concurrency": concurrency, "timeout": timeout}
    defaults.update({k: v for k, v in given.items() if v is not None})
    specs = list(file.judges)
    for model in judges:
        specs.append(JudgeSpec(model=model, api_base=api_base, api_key_env=api_key_env, **defaults))
    config = JuryConfig(
        judges=tuple(specs),
        rubric=rubric,
        prompt_template=file.prompt_template,
        name=name if name is not None else file.name,
        max_retries=file.max_retries,
        retry_base_seconds=file.retry_base_seconds,
        retry_max_seconds=file.retry_max_seconds,
        samples=samples if samples is not None else 1,
    )
    return config.with_template(template) if template is not None else config


def judges_from_text(text: str, **settings: Any) -> tuple[JudgeSpec, ...]:
    """Judges written one per line as ``MODEL`` or ``MODEL @ API_BASE`` (the page's judge box).

    Blank lines and ``#`` comments are skipped; ``settings`` (temperature, concurrency ...) apply to all.

    Examples
    --------
    >>> [j.api_base for j in judges_from_text("openai/gpt-4o\\nopenai/llama @ http://127.0.0.1:8000/v1")]
    [None, 'http://127.0.0.1:8000/v1']
    """
    judges: list[JudgeSpec] = []
    given = {k: v for k, v in settings.items() if v is not None}
    for n, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        model, _, base = (part.strip() for part in line.partition("@"))
        try:
            judges.append(JudgeSpec(model=model, api_base=base or given.get("api_base"),
                                    **{k: v for k, v in given.items() if k != "api_base"}))
        except ValidationError as exc:
            raise ValidationError(f"judge line {n}: {exc}") from None
    return tuple(judges)
