import type { LanguageModel } from '../model/index.js';
import { ErrorCodes, UserInputError } from '../util/index.js';
import type { CredentialVault, ResolvedCredential } from './credentials.js';
import type { AgentDefinition } from './manifest-schemas.js';

/**
 * Turns `provider/model` into a LanguageModel. The agentd runtime passes the model registry's
 * `resolveModel`; the credential (from provider_credentials.yaml) is given when one applies.
 */
export type WorkflowModelResolver = (
  name: string,
  options: { credential?: ResolvedCredential },
) => LanguageModel;

/** What the registry knows about the model behind one agent; safe to print and persist. */
export interface AdapterMetadata {
  agentId: string;
  llm: string;
  provider: string;
  modelId: string;
  credentialId: string | undefined;
  credentialAvailable: boolean;
  /** Filled once the model is resolved: the adapter's spec version and context window. */
  specificationVersion?: string;
  contextWindowTokens?: number;
}

export interface AdapterRegistry {
  /** Resolves (once, then cached) the model of an agent. Throws a UserInputError naming the agent. */
  modelFor(agentId: string): LanguageModel;
  metadata(agentId: string): AdapterMetadata | undefined;
  list(): AdapterMetadata[];
}

export function createAdapterRegistry(options: {
  agents: ReadonlyArray<AgentDefinition>;
  credentials: CredentialVault;
  resolveModel: WorkflowModelResolver | undefined;
  /** `provider/model` used for every agent instead of its `llm` (e.g. the CLI's `--model`). */
  modelOverride?: string;
}): AdapterRegistry {
  const llmOf = (agent: AgentDefinition) => options.modelOverride ?? agent.llm;
  const definitions = new Map(options.agents.map((agent) => [agent.id, agent]));
  const entries = new Map<string, AdapterMetadata>();
  const models = new Map<string, LanguageModel>();
  const credentialFor = (agent: AgentDefinition): ResolvedCredential | undefined => {
    const llm = llmOf(agent);
    const provider = llm.slice(0, llm.indexOf('/'));
    return agent.credential_id
      ? options.credentials.get(agent.credential_id)
      : options.credentials.forProvider(provider);
  };
  for (const agent of options.agents) {
    const llm = llmOf(agent);
    const slash = llm.indexOf('/');
    const credential = credentialFor(agent);
    entries.set(agent.id, {
      agentId: agent.id,
      llm,
      provider: llm.slice(0, slash),
      modelId: llm.slice(slash + 1),
      credentialId: agent.credential_id ?? credential?.id,
      credentialAvailable: credential !== undefined,
    });
  }
  return {
    modelFor(agentId) {
      const cached = models.get(agentId);
      if (cached) return cached;
      const agent = definitions.get(agentId);
      if (!agent)
        throw new UserInputError({
          code: ErrorCodes.notFound,
          message: `agent "${agentId}" is not defined in agents.yaml`,
        });
      if (!options.resolveModel) {
        throw new UserInputError({
          code: ErrorCodes.invalidConfig,
          message: `agent "${agentId}" needs a model (${llmOf(agent)}) but the engine was created without resolveModel`,
        });
      }
      if (agent.credential_id && !options.modelOverride && !options.credentials.get(agent.credential_id)) {
        const problem = options.credentials.list().find((entry) => entry.id === agent.credential_id)?.problem;
        throw new UserInputError({
          code: ErrorCodes.providerAuth,
          message: `agent "${agentId}" uses credential "${agent.credential_id}", which is not available${problem ? `: ${problem}` : ''}`,
        });
      }
      const credential = credentialFor(agent);
      const model = options.resolveModel(llmOf(agent), credential ? { credential } : {});
      models.set(agentId, model);
      const entry = entries.get(agentId)!;
      entry.specificationVersion = model.specificationVersion;
      entry.contextWindowTokens = model.contextWindowTokens;
      return model;
    },
    metadata: (agentId) => {
      const entry = entries.get(agentId);
      return entry ? { ...entry } : undefined;
    },
    list: () => [...entries.values()].map((entry) => ({ ...entry })),
  };
}
