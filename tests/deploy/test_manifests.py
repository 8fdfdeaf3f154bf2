"""deploy/ checked offline: Kubernetes manifests against the Kubernetes schemas (kubernetes-validate),
compose.yaml against the Compose specification's schema (as check-jsonschema ships it), and both
against `memwarden/config.py`: every MEMWARDEN_* variable they set is a setting, secrets sit only
in Secrets or env files, and the production profile accepts what they set.

No Docker engine or cluster runs here, so these are the checks that can be real: schema validity,
the wiring between pieces (selectors, ports, probes), and the configuration the processes would get.
"""

from __future__ import annotations

import json
import re
import secrets
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from pydantic import ValidationError

from memwarden.config import SECRET_FIELDS, Profile
from memwarden.config_doc import _InitOnly, field_of, production_required

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose.yaml"
MEMWARDEN_SERVICES = ("api", "worker")
# Variables memwarden's containers may carry that are not memwarden settings, and who reads them.
FOREIGN_VARIABLES = {
    "PGSSLROOTCERT": "asyncpg (libpq's CA file for sslmode verify-full)",
    "OTEL_EXPORTER_OTLP_ENDPOINT": "the OpenTelemetry SDK",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "the OpenTelemetry SDK",
    "OTEL_SERVICE_NAME": "the OpenTelemetry SDK",
}
K8S_VERSIONS = ("1.30.0", kubernetes_validate.utils.latest_version())


# --- loading ---------------------------------------------------------------------------------------


def k8s_documents() -> list[tuple[str, dict[str, Any]]]:
    docs: list[tuple[str, dict[str, Any]]] = []
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend((path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def k8s_by_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for _, d in k8s_documents() if d["kind"] == kind}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())  # type: ignore[no-any-return]


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
            env[key.strip()] = value.strip()
    return env


def service_env(name: str) -> tuple[dict[str, str], dict[str, str]]:
    """(environment, env-file variables) of a compose service; env files read from their committed .example."""
    service = compose()["services"][name]
    environment = {k: str(v) for k, v in (service.get("environment") or {}).items()}
    from_files: dict[str, str] = {}
    for ref in service.get("env_file") or []:
        from_files |= read_env_file(DEPLOY / f"{ref if isinstance(ref, str) else ref['path']}.example")
    return environment, from_files


def k8s_pod_env(deployment: dict[str, Any]) -> dict[str, str]:
    """What a Deployment's container gets: its envFrom ConfigMaps and Secrets, then its own env."""
    maps, secrets = k8s_by_kind("ConfigMap"), k8s_by_kind("Secret")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env |= maps[source["configMapRef"]["name"]]["data"]
        if "secretRef" in source:
            env |= secrets[source["secretRef"]["name"]]["stringData"]
    env |= {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return env


def settings_from(env: dict[str, str]) -> _InitOnly:
    """Settings built from exactly these variables (pydantic parses them as the process would from env)."""
    values: dict[str, Any] = {}
    for key, raw in env.items():
        name = field_of(key)
        if name is None:
            continue
        annotation = str(_InitOnly.model_fields[name].annotation)
        values[name] = json.loads(raw) if annotation.startswith("list") else raw
    if "auth_secret" in values:
        # The examples hold placeholders, which production refuses (tests/unit/test_keys_and_tokens.py):
        # a real secret stands in, so what is checked here is everything else they set.
        values["auth_secret"] = secrets.token_urlsafe(48)
    return _InitOnly(**values)


# --- Kubernetes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_are_valid_kubernetes_objects(version: str) -> None:
    docs = k8s_documents()
    assert len(docs) >= 10
    for name, doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name} {doc['kind']}/{doc['metadata']['name']} invalid for {version}: {exc.message}")


def test_the_kubernetes_schema_check_can_fail() -> None:
    (_name, deployment), *_ = [(n, d) for n, d in k8s_documents() if d["kind"] == "Deployment"]
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["pathh"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_kustomization_lists_every_manifest() -> None:
    listed = yaml.safe_load((K8S / "kustomization.yaml").read_text())["resources"]
    on_disk = sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    assert sorted(listed) == on_disk


def test_k8s_objects_share_one_namespace() -> None:
    for name, doc in k8s_documents():
        if doc["kind"] != "Namespace":
            assert doc["metadata"]["namespace"] == "memwarden", name


def test_deployments_probe_healthz_and_readyz_on_the_configured_ports() -> None:
    deployments = k8s_by_kind("Deployment")
    assert set(deployments) == {"memwarden-api", "memwarden-worker"}
    for name, deployment in deployments.items():
        env = k8s_pod_env(deployment)
        settings = settings_from(env)
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        expected = settings.api_port if name.endswith("api") else settings.worker_health_port
        assert expected is not None, f"{name}: no health port configured"
        for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
            get = container[probe]["httpGet"]
            assert get["path"] == path, (name, probe)
            assert ports[get["port"]] == expected, (name, probe)
        assert container["args"][0] == ("api" if name.endswith("api") else "worker")
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
        assert deployment["spec"]["replicas"] >= 2


def _selects(selector: dict[str, Any], deployment: dict[str, Any]) -> bool:
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    return all(labels.get(k) == v for k, v in selector["matchLabels"].items())


def test_pdbs_hpa_and_service_point_at_the_deployments() -> None:
    deployments = k8s_by_kind("Deployment")
    pdbs = k8s_by_kind("PodDisruptionBudget")
    for name, deployment in deployments.items():
        covering = [p for p in pdbs.values() if _selects(p["spec"]["selector"], deployment)]
        assert len(covering) == 1, f"{name}: {len(covering)} PodDisruptionBudgets"
        assert covering[0]["spec"]["minAvailable"] < deployment["spec"]["replicas"], "a PDB that blocks every drain"
        assert _selects(deployment["spec"]["selector"], deployment)
    (hpa,) = k8s_by_kind("HorizontalPodAutoscaler").values()
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "memwarden-worker"}
    assert hpa["spec"]["minReplicas"] >= 2 and hpa["spec"]["maxReplicas"] > hpa["spec"]["minReplicas"]
    (service,) = k8s_by_kind("Service").values()
    api = deployments["memwarden-api"]
    assert all(api["spec"]["template"]["metadata"]["labels"][k] == v for k, v in service["spec"]["selector"].items())


def test_network_policy_allows_only_the_backing_services() -> None:
    policies = k8s_by_kind("NetworkPolicy")
    deny = policies["default-deny"]["spec"]
    assert deny["podSelector"] == {} and set(deny["policyTypes"]) == {"Ingress", "Egress"}
    assert "egress" not in deny and "ingress" not in deny
    worker_env = settings_from(k8s_pod_env(k8s_by_kind("Deployment")["memwarden-worker"]))
    temporal_port = int(worker_env.temporal_address.rsplit(":", 1)[1])
    pg_port = 5432
    qdrant_port = int(re.search(r":(\d+)", worker_env.qdrant_url.split("//", 1)[1]).group(1))  # type: ignore[union-attr]

    def ports(policy: str) -> set[int]:
        return {p["port"] for rule in policies[policy]["spec"]["egress"] for p in rule.get("ports", [])}

    worker_secret = k8s_by_kind("Secret")["memwarden-secrets"]["stringData"]
    redis_port = int(re.search(r"@[^:/]+:(\d+)", worker_secret["MEMWARDEN_REDIS_URL"]).group(1))  # type: ignore[union-attr]
    db_port = int(re.search(r"@[^:/]+:(\d+)", worker_secret["MEMWARDEN_DATABASE_URL"]).group(1))  # type: ignore[union-attr]
    assert db_port == pg_port
    assert {53, temporal_port, pg_port, qdrant_port, redis_port, 443} <= ports("memwarden-worker")
    # The API reaches neither Qdrant nor Redis: searches run on the workers.
    assert {53, temporal_port, pg_port} <= ports("memwarden-api")
    assert not {qdrant_port, redis_port} & ports("memwarden-api")
    assert policies["memwarden-worker"]["spec"]["ingress"] == []
    for name in ("memwarden-api", "memwarden-worker"):
        for rule in policies[name]["spec"]["egress"]:
            assert rule.get("ports"), f"{name}: an egress rule open on every port"
            for peer in rule["to"]:
                assert peer.get("ipBlock", {}).get("cidr") != "0.0.0.0/0", f"{name}: egress to anywhere"


# --- Compose --------------------------------------------------------------------------------------


def compose_validator() -> jsonschema.protocols.Validator:
    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath("compose-spec.json").read_text()
    schema = json.loads(text)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)  # type: ignore[no-any-return]


def test_compose_file_matches_the_compose_specification() -> None:
    errors = [f"{e.json_path}: {e.message}" for e in compose_validator().iter_errors(compose())]
    assert errors == []


def test_the_compose_schema_check_can_fail() -> None:
    validator = compose_validator()
    broken = compose()
    broken["services"]["api"]["healthcheck"]["intervall"] = "10s"
    assert list(validator.iter_errors(broken))
    broken = compose()
    broken["services"]["api"]["depends_on"]["worker"]["condition"] = "service_happy"
    assert list(validator.iter_errors(broken))


def test_compose_runs_the_production_shaped_stack() -> None:
    services = compose()["services"]
    for part in ("temporal", "temporal-ui", "temporal-postgresql", "postgresql", "qdrant", "redis", "otel-collector"):
        assert part in services, part
    for name in MEMWARDEN_SERVICES:
        assert services[name]["deploy"]["replicas"] == 2
        assert services[name]["command"][0] == name
    one_shot = {n for n, s in services.items() if s.get("restart") == "no"}
    assert one_shot == {"temporal-schema", "temporal-namespace"}
    distroless = {"otel-collector"}  # no shell or HTTP client inside; documented in compose.yaml
    for name, service in services.items():
        if name not in one_shot | distroless:
            assert "healthcheck" in service, f"{name} has no health check"
    for stateful, mount in (("postgresql", "/var/lib/postgresql/data"), ("qdrant", "/qdrant/storage")):
        volumes = [v.split(":")[0] for v in services[stateful]["volumes"]]
        targets = [v.split(":")[1] for v in services[stateful]["volumes"]]
        assert mount in targets and all(v in compose()["volumes"] for v in volumes[: targets.index(mount) + 1])
    worker_health = services["worker"]["environment"]["MEMWARDEN_WORKER_HEALTH_PORT"]
    assert f":{worker_health}/readyz" in " ".join(services["worker"]["healthcheck"]["test"])


def test_compose_secrets_come_only_from_env_files() -> None:
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    assert "deploy/env/*.env" in gitignore
    for name, service in compose()["services"].items():
        for ref in service.get("env_file") or []:
            path = DEPLOY / (ref if isinstance(ref, str) else ref["path"])
            assert path.parent == DEPLOY / "env" and path.suffix == ".env", f"{name}: {path}"
            assert path.with_name(path.name + ".example").exists(), f"{name}: no {path.name}.example"
        environment = service.get("environment") or {}
        for key in environment:
            field = field_of(key)
            assert field not in SECRET_FIELDS, f"{name} sets secret {key} inline"
            assert "PASSWORD" not in key and "API_KEY" not in key, f"{name} sets {key} inline"
    for name in MEMWARDEN_SERVICES:
        _, from_files = service_env(name)
        for field in SECRET_FIELDS:
            assert f"MEMWARDEN_{field.upper()}" in from_files, f"{name}: secret {field} not in its env file"


# --- both against config.py -----------------------------------------------------------------------


def _variable_sources() -> list[tuple[str, dict[str, str]]]:
    sources = [(f"compose:{n}", {**service_env(n)[1], **service_env(n)[0]}) for n in MEMWARDEN_SERVICES]
    sources += [(f"k8s:{n}", k8s_pod_env(d)) for n, d in k8s_by_kind("Deployment").items()]
    return sources


def test_every_variable_the_manifests_set_is_a_setting() -> None:
    for where, env in _variable_sources():
        for key in env:
            if key.startswith("MEMWARDEN_"):
                assert field_of(key) is not None, f"{where}: {key} is not a field of memwarden/config.py"
            else:
                assert key in FOREIGN_VARIABLES, f"{where}: {key} is neither a setting nor a known foreign variable"
    for name, doc in k8s_documents():  # ConfigMaps and Secrets too, even keys no Deployment reads
        data = {**doc.get("data", {}), **doc.get("stringData", {})} if doc["kind"] in ("ConfigMap", "Secret") else {}
        for key in data:
            if key.startswith("MEMWARDEN_"):
                assert field_of(key) is not None, f"{name}: {key} is not a setting"


def test_manifests_set_every_required_setting_and_the_production_profile_accepts_them() -> None:
    required = production_required()
    assert {"database_url", "auth_secret", "codec_key"} <= set(required)
    for where, env in _variable_sources():
        settings = settings_from(env)
        assert settings.profile is Profile.PRODUCTION, where
        for name in required:
            assert f"MEMWARDEN_{name.upper()}" in env, f"{where}: required {name} is not set"
        assert settings.database_url.startswith("postgresql+asyncpg://"), where  # type: ignore[union-attr]
        assert settings.cache_backend.value == "redis" and settings.vector_backend.value == "qdrant", where  # type: ignore[union-attr]
        assert settings.qdrant_location is None, f"{where}: local mode is for tests only"
        # Removing any one required variable makes the same configuration refuse to start.
        for name in required:
            reduced = {k: v for k, v in env.items() if k != f"MEMWARDEN_{name.upper()}"}
            with pytest.raises(ValidationError):
                settings_from(reduced)


def test_secrets_live_in_secrets_not_configmaps() -> None:
    for name, config_map in k8s_by_kind("ConfigMap").items():
        for key in config_map["data"]:
            assert field_of(key) not in SECRET_FIELDS, f"ConfigMap {name} holds secret {key}"
    secret = k8s_by_kind("Secret")["memwarden-secrets"]["stringData"]
    assert {f"MEMWARDEN_{f.upper()}" for f in SECRET_FIELDS} <= set(secret)


def test_k8s_mounts_the_tls_files_the_config_names() -> None:
    for name, deployment in k8s_by_kind("Deployment").items():
        settings = settings_from(k8s_pod_env(deployment))
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
        secrets = k8s_by_kind("Secret")
        files = [settings.temporal_tls_ca_file, settings.temporal_tls_cert_file, settings.temporal_tls_key_file]
        files.append(Path(k8s_pod_env(deployment)["PGSSLROOTCERT"]))
        for path in files:
            assert path is not None
            volume = volumes[mounts[str(path.parent)]]
            assert path.name in secrets[volume["secret"]["secretName"]]["stringData"], f"{name}: {path}"
        assert settings.temporal_tls is True
        assert "ssl=verify-full" in (settings.database_url or ""), f"{name}: PostgreSQL without verified TLS"


# --- Dockerfile -----------------------------------------------------------------------------------


def test_dockerfile_copies_what_exists_and_runs_unprivileged() -> None:
    lines = (DEPLOY / "Dockerfile").read_text().replace("\\\n", " ").splitlines()
    instructions = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    copies = [i.split()[1:-1] for i in instructions if i.startswith("COPY") and "--from" not in i]
    allowed = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    for sources in copies:
        for source in sources:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
            assert f"!{source}" in allowed or f"!{source}/" in allowed, f"{source} is excluded from the context"
    copied = {source.rstrip("/") for sources in copies for source in sources}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in project["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert packages <= copied, f"the image would miss packages: {sorted(packages - copied)}"
    assert {"pyproject.toml", project["project"]["readme"]} <= copied
    user = [i.split()[1] for i in instructions if i.startswith("USER")]
    assert user and not user[-1].startswith(("0", "root")), "the image must not run as root"
    assert any(i.startswith("HEALTHCHECK") for i in instructions)
    assert 'ENTRYPOINT ["memwarden"]' in instructions
    installs = [i for i in instructions if "pip install" in i and "--upgrade pip" not in i.split("&&")[-1]]
    assert any('pip install ".[mcp]"' in i for i in installs), "the image must serve /mcp (the mcp extra)"
    assert "mcp" in project["project"]["optional-dependencies"]
    env_names = re.findall(r"\b(MEMWARDEN_[A-Z0-9_]+)=", " ".join(i for i in instructions if i.startswith("ENV")))
    assert env_names and all(field_of(n) is not None for n in env_names), env_names
