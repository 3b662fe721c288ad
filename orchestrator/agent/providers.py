"""`[agent] provider`: build the middle agent's model client for the provider the config names.

anthropic, bedrock and vertex go through the anthropic SDK's own clients (one adapter,
AnthropicLLM, the same structured output); openai-compatible and claude-code have adapters of
their own (agent.openai_compat, agent.claude_code_llm). The cloud SDKs (boto3, google-auth,
openai) are optional extras, imported only when their provider is used; a missing one is one
error line with the pip command.
"""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING, Any

from orchestrator.errors import ConfigError, ModelAccessError

if TYPE_CHECKING:
    from orchestrator.agent.llm import ProviderLLM
    from orchestrator.config.settings import AgentConfig

# provider -> (the module it needs, the extra that installs it)
EXTRAS = {"bedrock": ("boto3", "bedrock"), "vertex": ("google.auth", "vertex"),
          "openai-compatible": ("openai", "openai")}

BEDROCK_CREDENTIALS = ("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or "
                       "[agent] aws_profile) as the AWS CLI reads them")
VERTEX_CREDENTIALS = ("run `gcloud auth application-default login` or set GOOGLE_APPLICATION_CREDENTIALS "
                      "to a credentials file")


def require_extra(provider: str) -> None:
    """ConfigError naming the pip extra when the provider's SDK is not installed."""
    if provider not in EXTRAS:
        return
    module, extra = EXTRAS[provider]
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(f"[agent] provider = {provider!r} needs the {module.split('.')[0]} package: "
                          f"pip install 'middle-agent[{extra}]'")


def build_agent_llm(cfg: AgentConfig, *, max_retries: int = 3) -> ProviderLLM:
    """The middle agent's model for `[agent]`; ModelAccessError when the credentials are missing."""
    require_extra(cfg.provider)
    if cfg.provider == "anthropic":
        from orchestrator.agent.llm import AnthropicLLM

        return AnthropicLLM(cfg.model, cfg.max_tokens, base_url=cfg.base_url, max_retries=max_retries,
                            timeout_s=cfg.timeout_s)
    if cfg.provider == "bedrock":
        return bedrock_llm(cfg, max_retries=max_retries)
    if cfg.provider == "vertex":
        return vertex_llm(cfg, max_retries=max_retries)
    if cfg.provider == "openai-compatible":
        from orchestrator.agent.openai_compat import OpenAICompatibleLLM

        return OpenAICompatibleLLM.from_config(cfg, max_retries=max_retries)
    if cfg.provider == "codex":
        from orchestrator.agent.codex_llm import CodexLLM

        return CodexLLM(cfg.model, cli_path=cfg.cli_path, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                        timeout_s=cfg.timeout_s)
    from orchestrator.agent.claude_code_llm import ClaudeCodeLLM

    return ClaudeCodeLLM(cfg.model, cli_path=cfg.cli_path, timeout_s=cfg.timeout_s)


def bedrock_region(cfg: AgentConfig) -> str | None:
    """The region as the AWS SDK finds it: [agent] region, AWS_REGION, AWS_DEFAULT_REGION, the profile's."""
    region = cfg.region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region:
        return region
    import boto3

    return boto3.Session(profile_name=cfg.aws_profile).region_name  # type: ignore[no-any-return]


def bedrock_credentials(cfg: AgentConfig) -> Any:
    """boto3's credentials from its usual chain (env, profile, SSO, instance role), or None."""
    import boto3
    import botocore.exceptions

    try:
        return boto3.Session(profile_name=cfg.aws_profile).get_credentials()
    except botocore.exceptions.BotoCoreError as exc:  # e.g. a profile that does not exist
        raise ModelAccessError(f"Amazon Bedrock: {exc}: {BEDROCK_CREDENTIALS}") from None


def bedrock_llm(cfg: AgentConfig, *, max_retries: int = 3) -> ProviderLLM:
    import anthropic
    import botocore.exceptions

    from orchestrator.agent.api_errors import http_client
    from orchestrator.agent.llm import Access, AnthropicLLM

    region = bedrock_region(cfg)
    if not region:
        raise ModelAccessError("Amazon Bedrock needs a region: set [agent] region = \"us-east-1\" (or AWS_REGION)")
    bearer = os.environ.get("AWS_BEARER_TOKEN_BEDROCK")  # Bedrock API keys, which the SDK reads itself
    credentials = None if bearer else bedrock_credentials(cfg)
    if not bearer and credentials is None:
        raise ModelAccessError(f"Amazon Bedrock: no AWS credentials found: {BEDROCK_CREDENTIALS}")
    # boto3 names where it found them: "env", "shared-credentials-file", "sso", "iam-role", ...
    source = "AWS_BEARER_TOKEN_BEDROCK" if bearer else f"AWS credentials: {getattr(credentials, 'method', '?')}"
    client = anthropic.AnthropicBedrock(aws_region=region, aws_profile=cfg.aws_profile, base_url=cfg.base_url,
                                        max_retries=max_retries, timeout=cfg.timeout_s,
                                        http_client=http_client(anthropic))
    access = Access(api="Amazon Bedrock", credential="AWS credentials", credential_hint=BEDROCK_CREDENTIALS,
                    endpoint_hint="[agent] base_url / region",
                    errors=(RuntimeError, botocore.exceptions.BotoCoreError), source=f"{region}, {source}")
    return AnthropicLLM(cfg.model, cfg.max_tokens, client=client, access=access, timeout_s=cfg.timeout_s)


def vertex_project(cfg: AgentConfig) -> str | None:
    return cfg.project_id or os.environ.get("ANTHROPIC_VERTEX_PROJECT_ID") or None


def vertex_llm(cfg: AgentConfig, *, max_retries: int = 3) -> ProviderLLM:
    import anthropic
    import google.auth
    import google.auth.exceptions

    from orchestrator.agent.api_errors import http_client
    from orchestrator.agent.llm import Access, AnthropicLLM

    region = cfg.region or os.environ.get("CLOUD_ML_REGION")
    if not region:
        raise ModelAccessError("Google Vertex AI needs a region: set [agent] region = \"us-east5\" "
                               "(or CLOUD_ML_REGION)")
    try:  # Application Default Credentials, as gcloud and every Google SDK read them
        credentials, adc_project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except google.auth.exceptions.GoogleAuthError as exc:
        raise ModelAccessError(f"Google Vertex AI: no credentials ({exc}): {VERTEX_CREDENTIALS}") from None
    project = vertex_project(cfg) or adc_project
    if not project:
        raise ModelAccessError("Google Vertex AI needs a project: set [agent] project_id (or "
                               "ANTHROPIC_VERTEX_PROJECT_ID)")
    client = anthropic.AnthropicVertex(region=region, project_id=project, credentials=credentials,
                                       base_url=cfg.base_url, max_retries=max_retries, timeout=cfg.timeout_s,
                                       http_client=http_client(anthropic))
    access = Access(api="Google Vertex AI", credential="Google credentials", credential_hint=VERTEX_CREDENTIALS,
                    endpoint_hint="[agent] base_url / region",
                    errors=(RuntimeError, google.auth.exceptions.GoogleAuthError),
                    source=f"project {project}, {region}, {_google_kind(credentials)} credentials")
    return AnthropicLLM(cfg.model, cfg.max_tokens, client=client, access=access, timeout_s=cfg.timeout_s)


def _google_kind(credentials: Any) -> str:
    """"service_account", "credentials" (a user's gcloud login), "compute_engine", ...: the module's name."""
    return str(type(credentials).__module__).rsplit(".", 1)[-1]
