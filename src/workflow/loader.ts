import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { basename, extname, isAbsolute, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { z } from 'zod';
import { yamlParser } from '../util/index.js';
import { buildDag, type WorkflowDag } from './dag.js';
import {
  type ManifestKey,
  type MemoryBackend,
  manifestFiles,
  type WorkflowManifests,
} from './manifest-schemas.js';
import type { MemoryStoreKind } from './memory-store.js';
import type { WorkflowPlugin } from './telemetry.js';
import { builtinFunctions, compileInputCheck, type LoadedTool, type WorkflowFunction } from './tools.js';
import {
  formatIssuePath,
  validateDagInvariants,
  validateReferences,
  type WorkflowIssue,
  WorkflowValidationError,
} from './validate.js';

/** Bumped when execution semantics change, so recorded runs say which engine produced them. */
const workflowEngineVersion = '1.0.0';
/** Bumped when a manifest schema changes incompatibly. */
const workflowSchemaVersion = '1';

/** Manifests are hand-written; anything larger is a mistake or an attack. */
const maxManifestBytes = 1024 * 1024;
/** Aliases resolved per manifest; enough for shared blocks, far too few for exponential expansion. */
const maxManifestAliases = 100;

export interface WorkflowMetadata {
  workflowId: string;
  workflowVersion: string;
  engineVersion: string;
  schemaVersion: string;
  /** SHA-256 (hex) of each manifest file present, by file name; schema files as `schemas/<id>.json`. */
  manifestHashes: Record<string, string>;
}

export interface MemoryStorePlan {
  kind: MemoryStoreKind;
  backend: MemoryBackend;
  maxItems: number | undefined;
}

export interface LoadedPlugin {
  id: string;
  plugin: WorkflowPlugin;
}

/** A workflow directory after the seven load steps: everything the engine needs, nothing opened yet. */
export interface LoadedWorkflow {
  dir: string;
  id: string;
  manifests: WorkflowManifests;
  dag: WorkflowDag;
  /** JSON Schemas from `schemas/<id>.json`. */
  schemas: ReadonlyMap<string, Record<string, unknown>>;
  tools: ReadonlyMap<string, LoadedTool>;
  memory: { stores: Record<MemoryStoreKind, MemoryStorePlan>; taskStoreRead: boolean };
  plugins: ReadonlyArray<LoadedPlugin>;
  metadata: WorkflowMetadata;
}

export interface LoadWorkflowOptions {
  /** Skip step 7 (plugins), e.g. for `agentd workflow validate`, which must not run plugin code. */
  loadPlugins?: boolean;
  /**
   * `false`: module tools and plugins are only checked (the file exists, inside the workflow directory),
   * never imported, so no code of the workflow runs. Their `invoke` is then undefined: for validation only.
   */
  importModules?: boolean;
}

function sha256(text: string | Buffer): string {
  return createHash('sha256').update(text).digest('hex');
}

interface RawManifest {
  text: string;
  value: unknown;
}

/**
 * Loads a workflow directory in seven steps:
 * 1. read the manifests (YAML) and `schemas/*.json`;
 * 2. validate each manifest against its schema, then the references between them;
 * 3. build nodes, edges and the DAG;
 * 4. check the DAG invariants;
 * 5. plan the memory stores (backends, retention);
 * 6. register tools (builtin, engine-registered or imported modules) and their input checks;
 * 7. load plugins.
 * Any problem throws one WorkflowValidationError listing every issue found up to the failing step.
 */
export async function loadWorkflow(
  dirInput: string,
  options: LoadWorkflowOptions = {},
): Promise<LoadedWorkflow> {
  const dir = resolve(dirInput);
  const issues: WorkflowIssue[] = [];
  const fail = (): never => {
    throw new WorkflowValidationError(dir, issues);
  };

  // Step 1: read manifests.
  if (!existsSync(dir)) {
    issues.push({
      file: '(directory)',
      path: '(root)',
      rule: 'manifest-read',
      message: `expected a workflow directory at ${dir}`,
    });
    fail();
  }
  const raw = new Map<ManifestKey, RawManifest>();
  const hashes: Record<string, string> = {};
  for (const [key, spec] of Object.entries(manifestFiles) as Array<
    [ManifestKey, (typeof manifestFiles)[ManifestKey]]
  >) {
    const path = join(dir, spec.file);
    if (!existsSync(path)) {
      if (spec.required)
        issues.push({
          file: spec.file,
          path: '(root)',
          rule: 'manifest-read',
          message: 'expected this file in the workflow directory',
        });
      continue;
    }
    const size = statSync(path).size;
    if (size > maxManifestBytes) {
      issues.push({
        file: spec.file,
        path: '(root)',
        rule: 'manifest-read',
        message: `expected at most ${maxManifestBytes} bytes, found ${size}`,
      });
      continue;
    }
    const text = readFileSync(path, 'utf8');
    hashes[spec.file] = sha256(text);
    const document = yamlParser().parseDocument(text);
    if (document.errors.length > 0) {
      for (const error of document.errors) {
        const line = error.linePos?.[0];
        issues.push({
          file: spec.file,
          path: line ? `line ${line.line}, column ${line.col}` : '(root)',
          rule: 'manifest-read',
          message: `expected valid YAML: ${error.message.split('\n')[0]}`,
        });
      }
      continue;
    }
    let value: unknown;
    try {
      // Alias expansion happens here; a "billion laughs" document stops at the alias budget.
      value = document.toJS({ maxAliasCount: maxManifestAliases });
    } catch (error) {
      issues.push({
        file: spec.file,
        path: '(root)',
        rule: 'manifest-read',
        message: `expected valid YAML: ${(error as Error).message.split('\n')[0]}`,
      });
      continue;
    }
    raw.set(key, { text, value: value ?? {} });
  }
  const schemas = new Map<string, Record<string, unknown>>();
  const schemaDir = join(dir, 'schemas');
  if (existsSync(schemaDir)) {
    for (const name of readdirSync(schemaDir).sort()) {
      if (extname(name) !== '.json') continue;
      const text = readFileSync(join(schemaDir, name), 'utf8');
      hashes[`schemas/${name}`] = sha256(text);
      try {
        const value = JSON.parse(text) as unknown;
        if (typeof value !== 'object' || value === null || Array.isArray(value))
          throw new Error('expected a JSON object');
        schemas.set(basename(name, '.json'), value as Record<string, unknown>);
      } catch (error) {
        issues.push({
          file: `schemas/${name}`,
          path: '(root)',
          rule: 'manifest-read',
          message: `expected a JSON Schema object: ${(error as Error).message}`,
        });
      }
    }
  }
  if (issues.length > 0) fail();

  // Step 2: schemas, then references.
  const parsed: Partial<Record<ManifestKey, unknown>> = {};
  for (const [key, spec] of Object.entries(manifestFiles) as Array<
    [ManifestKey, (typeof manifestFiles)[ManifestKey]]
  >) {
    const result = (spec.schema as z.ZodType).safeParse(raw.get(key)?.value ?? {});
    if (result.success) parsed[key] = result.data;
    else {
      for (const issue of result.error.issues) {
        issues.push({
          file: spec.file,
          path: formatIssuePath(issue.path),
          rule: 'manifest-schema',
          message: describeZodIssue(issue),
        });
      }
    }
  }
  if (issues.length > 0) fail();
  const manifests = parsed as unknown as WorkflowManifests;
  for (const [id, schema] of schemas) {
    try {
      compileInputCheck(schema);
    } catch (error) {
      issues.push({
        file: `schemas/${id}.json`,
        path: '(root)',
        rule: 'manifest-schema',
        message: `expected a usable JSON Schema: ${(error as Error).message}`,
      });
    }
  }
  issues.push(...validateReferences(manifests, { schemaIds: new Set(schemas.keys()) }));

  // Step 3: the DAG.
  const dag = buildDag(manifests.workflow);

  // Step 4: DAG invariants.
  issues.push(...validateDagInvariants(manifests));
  if (issues.length > 0) fail();

  // Step 5: memory stores.
  const memory = manifests.memory.memory;
  const plan = (
    kind: MemoryStoreKind,
    store: { backend: MemoryBackend; maxItems: number | undefined },
  ): MemoryStorePlan => ({
    kind,
    backend: store.backend,
    maxItems: store.maxItems,
  });
  const taskStoreRead = memory.context_profiles.some(
    (profile) =>
      profile.sources.some((source) => source.store === 'task') &&
      manifests.workflow.nodes.some((node) => node.context === profile.id),
  );

  // Step 6: tools.
  const tools = new Map<string, LoadedTool>();
  for (const [index, manifest] of manifests.tools.tools.entries()) {
    const location = `tools[${index}].entrypoint`;
    let checkInput: LoadedTool['checkInput'];
    try {
      checkInput = compileInputCheck(manifest.input_schema);
    } catch (error) {
      issues.push({
        file: 'tools.yaml',
        path: `tools[${index}].input_schema`,
        rule: 'tools-load',
        message: `expected a usable JSON Schema: ${(error as Error).message}`,
      });
      continue;
    }
    const entry = manifest.entrypoint;
    if (entry.startsWith('builtin:')) {
      const name = entry.slice('builtin:'.length);
      const invoke = builtinFunctions[name];
      if (!invoke) {
        issues.push({
          file: 'tools.yaml',
          path: location,
          rule: 'tools-load',
          message: `expected one of the builtin tools ${Object.keys(builtinFunctions).join(', ')}; "${name}" is not one`,
        });
        continue;
      }
      tools.set(manifest.id, {
        id: manifest.id,
        manifest,
        invoke,
        entrypoint: { kind: 'builtin', name },
        checkInput,
      });
    } else if (entry.startsWith('function:')) {
      const name = entry.slice('function:'.length);
      tools.set(manifest.id, {
        id: manifest.id,
        manifest,
        invoke: undefined,
        entrypoint: { kind: 'function', name },
        checkInput,
      });
    } else if (options.importModules === false) {
      const { module, exportName } = splitEntrypoint(entry);
      const located = locateWorkflowModule(dir, module);
      if ('problem' in located) {
        issues.push({ file: 'tools.yaml', path: location, rule: 'tools-load', message: located.problem });
        continue;
      }
      tools.set(manifest.id, {
        id: manifest.id,
        manifest,
        invoke: undefined,
        entrypoint: { kind: 'module', name: exportName, module },
        checkInput,
      });
    } else {
      const loaded = await importExport(dir, entry);
      if (typeof loaded.value !== 'function') {
        issues.push({
          file: 'tools.yaml',
          path: location,
          rule: 'tools-load',
          message: loaded.problem ?? `expected "${loaded.exportName}" in ${loaded.module} to be a function`,
        });
        continue;
      }
      tools.set(manifest.id, {
        id: manifest.id,
        manifest,
        invoke: loaded.value as WorkflowFunction,
        entrypoint: { kind: 'module', name: loaded.exportName, module: loaded.module },
        checkInput,
      });
    }
  }
  if (issues.length > 0) fail();

  // Step 7: plugins.
  const plugins: LoadedPlugin[] = [];
  if (options.loadPlugins === false || options.importModules === false) {
    for (const [index, entry] of manifests.plugins.plugins.entries()) {
      if (!entry.enabled) continue;
      const located = locateWorkflowModule(dir, splitEntrypoint(entry.entrypoint).module);
      if ('problem' in located)
        issues.push({
          file: 'plugins.yaml',
          path: `plugins[${index}].entrypoint`,
          rule: 'plugins-load',
          message: located.problem,
        });
    }
  } else {
    for (const [index, entry] of manifests.plugins.plugins.entries()) {
      if (!entry.enabled) continue;
      const loaded = await importExport(dir, entry.entrypoint);
      let plugin: unknown = loaded.value;
      if (typeof plugin === 'function') {
        try {
          plugin = await (plugin as (config: unknown) => unknown)(structuredClone(entry.config));
        } catch (error) {
          loaded.problem = `the plugin factory threw: ${(error as Error).message}`;
          plugin = undefined;
        }
      }
      if (typeof plugin !== 'object' || plugin === null) {
        issues.push({
          file: 'plugins.yaml',
          path: `plugins[${index}].entrypoint`,
          rule: 'plugins-load',
          message: loaded.problem ?? 'expected a plugin object or a factory returning one',
        });
        continue;
      }
      plugins.push({ id: entry.id, plugin: { id: entry.id, ...(plugin as WorkflowPlugin) } });
    }
  }
  if (issues.length > 0) fail();

  const id = manifests.workflow.id ?? basename(dir);
  return {
    dir,
    id,
    manifests,
    dag,
    schemas,
    tools,
    memory: {
      stores: {
        task: plan('task', memory.task_store),
        project: plan('project', memory.project_store),
        global: plan('global', memory.global_store),
      },
      taskStoreRead,
    },
    plugins,
    metadata: {
      workflowId: id,
      workflowVersion: manifests.workflow.version,
      engineVersion: workflowEngineVersion,
      schemaVersion: workflowSchemaVersion,
      manifestHashes: hashes,
    },
  };
}

function describeZodIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === 'unrecognized_keys')
    return `unexpected field(s) ${issue.keys.map((key) => `"${key}"`).join(', ')}`;
  if (issue.code === 'invalid_value')
    return `expected one of ${issue.values.map((value) => JSON.stringify(value)).join(', ')}`;
  // A required field that takes any value (an evaluation case's `input`): zod names no type for it.
  if (issue.code === 'invalid_type' && issue.expected === 'nonoptional')
    return 'required: any value (write null for none)';
  if (issue.code === 'invalid_type' && issue.message.includes('received undefined'))
    return `required: expected ${issue.expected}`;
  return issue.message.replace(/^Invalid input: /, '');
}

function splitEntrypoint(entrypoint: string): { module: string; exportName: string } {
  const hash = entrypoint.lastIndexOf('#');
  return {
    module: hash >= 0 ? entrypoint.slice(0, hash) : entrypoint,
    exportName: hash >= 0 ? entrypoint.slice(hash + 1) : 'default',
  };
}

function isInside(root: string, candidate: string): boolean {
  const rel = relative(root, candidate);
  return rel === '' || (!rel.startsWith('..') && !isAbsolute(rel));
}

/**
 * Where a workflow's module (tool, plugin, assertion, REPL command) really is. A workflow directory is
 * handed around as a unit, so its code must be inside it: absolute paths, `..` escapes and symbolic links
 * that resolve outside the directory are refused, never imported.
 */
export function locateWorkflowModule(dir: string, module: string): { path: string } | { problem: string } {
  if (isAbsolute(module))
    return { problem: `expected a module path relative to the workflow directory, not ${module}` };
  const candidate = resolve(dir, module);
  if (!isInside(resolve(dir), candidate))
    return { problem: `expected ${module} inside the workflow directory; it leads outside` };
  if (!existsSync(candidate))
    return { problem: `expected a module file at ${module} (relative to the workflow directory)` };
  const real = realpathSync(candidate);
  if (!isInside(realpathSync(dir), real))
    return {
      problem: `expected ${module} inside the workflow directory; a symbolic link leads outside (to ${real})`,
    };
  return { path: real };
}

/** Imports `<relative module path>#<export>` (default export when no `#`). Never throws. */
async function importExport(
  dir: string,
  entrypoint: string,
): Promise<{ value: unknown; module: string; exportName: string; problem?: string }> {
  const { module, exportName } = splitEntrypoint(entrypoint);
  const located = locateWorkflowModule(dir, module);
  if ('problem' in located) return { value: undefined, module, exportName, problem: located.problem };
  try {
    const namespace = (await import(pathToFileURL(located.path).href)) as Record<string, unknown>;
    if (!(exportName in namespace))
      return {
        value: undefined,
        module,
        exportName,
        problem: `expected ${module} to export "${exportName}"`,
      };
    return { value: namespace[exportName], module, exportName };
  } catch (error) {
    return {
      value: undefined,
      module,
      exportName,
      problem: `cannot import ${module}: ${(error as Error).message}`,
    };
  }
}
