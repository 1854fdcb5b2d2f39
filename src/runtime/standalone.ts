import { dirname, join } from 'node:path';
import { createBus } from '../bus/index.js';
import { type AgentdConfig, providerSettings } from '../config/index.js';
import { createLedger, type Ledger } from '../ledger/index.js';
import { createMcpClientManager, type McpServerStatus, mcpConfigSchema } from '../mcp/index.js';
import {
  defaultModelName,
  type LanguageModel,
  type ProviderCredentials,
  resolveModel,
} from '../model/index.js';
import {
  createSkillExperience,
  createSkillLibrary,
  type SkillExperience,
  type SkillLibrary,
  skillsConfigSchema,
} from '../skills/index.js';
import { createStore, type Store } from '../store/index.js';
import { createToolRegistry } from '../tools/index.js';
import { createIdGenerator, silentLogger } from '../util/index.js';
import { createWorkQueue, type WorkQueue, workConfigSchema } from '../work/index.js';
import type { RunAgentWithTools } from '../workflow/index.js';
import { parseSection } from './config-section.js';
import { seedWorkspace } from './state-dir.js';
import { createWorkflowAgentRunner } from './workflow-agent.js';

/*
 * The pieces the CLI uses without a running server (`work`, `skills`, `workflow`, `mcp list`). They are
 * built here, next to createRuntime, so the composition of subsystems stays in the runtime layer and the
 * CLI only asks for what it needs.
 */

export interface StandaloneWork {
  queue: WorkQueue;
  ledger: Ledger;
  close(): Promise<void>;
}

/** The state directory's work queue and ledger, with no workers. */
export function openStandaloneWork(config: AgentdConfig): Promise<StandaloneWork> {
  return openWorkState(config);
}

/** `openStandaloneWork` with the store it opened, for the pieces built on the same database. */
async function openWorkState(config: AgentdConfig): Promise<StandaloneWork & { store: Store }> {
  const store = await createStore({
    stateDir: config.home,
    ...(config.databaseUrl ? { databaseUrl: config.databaseUrl } : {}),
    logger: silentLogger,
  });
  const queue = createWorkQueue({
    db: store.db,
    bus: createBus(),
    config: parseSection(workConfigSchema, config.sections.work, 'work'),
  });
  return {
    store,
    queue,
    ledger: createLedger({ db: store.db }),
    close: async () => {
      await queue.close();
      await store.close();
    },
  };
}

export interface StandaloneSkills {
  library: SkillLibrary;
  experience: SkillExperience;
  staleAfterDays: number;
  close(): Promise<void>;
}

/** The workspace's skill library and its experience records; proposed work goes to the state's queue. */
export async function openStandaloneSkills(config: AgentdConfig): Promise<StandaloneSkills> {
  const skillsConfig = parseSection(skillsConfigSchema, config.sections.skills, 'skills');
  const workspaceDir = seedWorkspace(config.home);
  const { store, queue, ledger, close } = await openWorkState(config);
  const library = createSkillLibrary({
    dirs: [join(workspaceDir, 'skills')],
    db: store.db,
    ledger,
  });
  const experience = createSkillExperience({
    db: store.db,
    ledger,
    library,
    config: skillsConfig.experience,
    proposeWork: (work) => queue.submit({ ...work, source: 'skills' }),
  });
  return { library, experience, staleAfterDays: skillsConfig.staleAfterDays, close };
}

/**
 * `credentials` with `override` in place of the entry of `modelName`'s provider. The override replaces the
 * entry as a whole, so its key only goes to its own base URL, never to the endpoint configured for it.
 */
export function withCredentialOverride(
  credentials: ProviderCredentials,
  modelName: string,
  override: { apiKey?: string; baseUrl?: string } | undefined,
): ProviderCredentials {
  if (!override) return credentials;
  const provider = modelName.slice(0, modelName.indexOf('/')).toLowerCase();
  return { ...credentials, [provider]: { apiKey: override.apiKey, baseUrl: override.baseUrl } };
}

/** The model called `name` (default: the config's, else the first provider with a key), see `withCredentialOverride`. */
export function resolveStandaloneModel(
  config: AgentdConfig,
  name?: string,
  override?: { apiKey?: string; baseUrl?: string },
): LanguageModel {
  const configured = providerSettings(config.credentials);
  const modelName = name ?? config.model ?? defaultModelName(process.env, configured);
  const credentials = withCredentialOverride(
    configured,
    modelName,
    override?.apiKey || override?.baseUrl ? override : undefined,
  );
  return resolveModel(modelName, { credentials, env: process.env });
}

/** Runs a workflow's agent tasks in the current directory, with nothing listening on its bus. */
export function createStandaloneWorkflowRunner(): RunAgentWithTools {
  return createWorkflowAgentRunner({
    bus: createBus(),
    workspaceDir: process.cwd(),
    idGenerator: createIdGenerator(),
    logger: silentLogger,
  });
}

/** Connects to each configured MCP server once and reports the state the first attempt reached. */
export async function checkMcpServers(config: AgentdConfig): Promise<McpServerStatus[]> {
  const manager = createMcpClientManager({
    config: parseSection(mcpConfigSchema, config.sections.mcp, 'mcp'),
    registry: createToolRegistry(),
    bus: createBus(),
    logger: silentLogger,
    ...(config.configPath ? { cwd: dirname(config.configPath) } : {}),
  });
  await manager.start();
  const servers = manager.list();
  await manager.close();
  return servers;
}
