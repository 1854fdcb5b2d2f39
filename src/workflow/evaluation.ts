import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { pathToFileURL } from 'node:url';
import { z } from 'zod';
import { decodeJson } from '../util/index.js';
import { type LoadedWorkflow, locateWorkflowModule } from './loader.js';
import type { EvaluationAssertion } from './manifest-schemas.js';
import type { WorkflowOutcome } from './task.js';
import { compileInputCheck } from './tools.js';

/** What a custom assertion sees. Return true/false, or `{ pass, message }`; a throw counts as a failure. */
export interface CustomAssertionInput {
  output: unknown;
  status: WorkflowOutcome;
  /** The value at `field_path` (the whole output when none). */
  value: unknown;
  expected: unknown;
  taskId: string;
}
export type CustomAssertion = (
  input: CustomAssertionInput,
) => boolean | { pass: boolean; message?: string } | Promise<boolean | { pass: boolean; message?: string }>;

export interface AssertionResult {
  type: EvaluationAssertion['type'];
  fieldPath?: string;
  pass: boolean;
  message: string;
}

export interface CaseResult {
  suite: string;
  caseId: string;
  pass: boolean;
  status: WorkflowOutcome;
  taskId: string;
  durationMs: number;
  assertions: AssertionResult[];
  error?: { code: string; message: string };
}

export interface EvaluationReport {
  workflowId: string;
  startedAt: number;
  totals: { cases: number; passed: number; failed: number };
  suites: Array<{ name: string; passed: number; failed: number; cases: CaseResult[] }>;
  /** Cases that passed in the baseline and fail now. */
  regressions: Array<{ suite: string; caseId: string }>;
  /** Cases that failed in the baseline and pass now. */
  fixed: Array<{ suite: string; caseId: string }>;
  /** Cases not in the baseline. */
  added: Array<{ suite: string; caseId: string }>;
  baselinePath: string | undefined;
  hadBaseline: boolean;
}

const baselineSchema = z.object({ cases: z.record(z.string(), z.boolean()) });

/** `a.b.0` into a value; undefined when any step is missing. */
export function getFieldPath(value: unknown, path: string | undefined): unknown {
  if (!path) return value;
  let current = value;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const keysA = Object.keys(a);
  const keysB = Object.keys(b);
  if (keysA.length !== keysB.length) return false;
  return keysA.every((key) =>
    deepEqual((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key]),
  );
}

function contains(value: unknown, expected: unknown): boolean {
  if (typeof value === 'string') return typeof expected === 'string' && value.includes(expected);
  if (Array.isArray(value)) return value.some((item) => deepEqual(item, expected));
  if (typeof value === 'object' && value !== null && typeof expected === 'object' && expected !== null) {
    return Object.entries(expected).every(([key, inner]) =>
      deepEqual((value as Record<string, unknown>)[key], inner),
    );
  }
  return false;
}

async function loadCustom(
  workflow: LoadedWorkflow,
  name: string,
  registered: Readonly<Record<string, CustomAssertion>>,
): Promise<CustomAssertion | undefined> {
  if (registered[name]) return registered[name];
  const hash = name.lastIndexOf('#');
  if (hash < 0) return undefined;
  const module = name.slice(0, hash);
  // Outside the workflow directory counts as not there: an unknown assertion, reported as such.
  const located = locateWorkflowModule(workflow.dir, module);
  if ('problem' in located) return undefined;
  const namespace = (await import(pathToFileURL(located.path).href)) as Record<string, unknown>;
  const candidate = namespace[name.slice(hash + 1)];
  return typeof candidate === 'function' ? (candidate as CustomAssertion) : undefined;
}

/**
 * Runs the suites of `evaluations.yaml` against the workflow (one run per case, one after another) and
 * compares with the baseline file of the previous evaluation: passes that now fail are regressions. The
 * report is then saved as the new baseline.
 */
export async function runEvaluationSuites(options: {
  workflow: LoadedWorkflow;
  run: (input: unknown) => Promise<{
    taskId: string;
    status: WorkflowOutcome;
    output: unknown;
    error?: { code: string; message: string };
    startedAt: number;
    completedAt: number;
  }>;
  assertions: Readonly<Record<string, CustomAssertion>>;
  schemaChecks: ReadonlyMap<string, (value: unknown) => string | undefined>;
  baselinePath: string | undefined;
  suites?: string[];
  now: () => number;
}): Promise<EvaluationReport> {
  const { workflow } = options;
  const startedAt = options.now();
  let baseline: Record<string, boolean> | undefined;
  if (options.baselinePath && existsSync(options.baselinePath)) {
    // A baseline that cannot be read counts as none: this run writes a fresh one.
    try {
      baseline = decodeJson(readFileSync(options.baselinePath, 'utf8'), baselineSchema, {
        what: `the evaluation baseline ${options.baselinePath}`,
      }).cases;
    } catch {
      baseline = undefined;
    }
  }
  const report: EvaluationReport = {
    workflowId: workflow.id,
    startedAt,
    totals: { cases: 0, passed: 0, failed: 0 },
    suites: [],
    regressions: [],
    fixed: [],
    added: [],
    baselinePath: options.baselinePath,
    hadBaseline: baseline !== undefined,
  };
  const current: Record<string, boolean> = {};
  for (const suite of workflow.manifests.evaluations.suites) {
    if (options.suites && !options.suites.includes(suite.name)) continue;
    const suiteResult = { name: suite.name, passed: 0, failed: 0, cases: [] as CaseResult[] };
    for (const testCase of suite.cases) {
      const result = await options.run(testCase.input);
      const assertions: AssertionResult[] = [];
      for (const assertion of testCase.assertions) {
        assertions.push(await checkAssertion(assertion, result, options));
      }
      const pass = assertions.every((entry) => entry.pass);
      const caseResult: CaseResult = {
        suite: suite.name,
        caseId: testCase.id,
        pass,
        status: result.status,
        taskId: result.taskId,
        durationMs: result.completedAt - result.startedAt,
        assertions,
        ...(result.error ? { error: { code: result.error.code, message: result.error.message } } : {}),
      };
      suiteResult.cases.push(caseResult);
      if (pass) suiteResult.passed++;
      else suiteResult.failed++;
      const key = `${suite.name}/${testCase.id}`;
      current[key] = pass;
      const before = baseline?.[key];
      if (baseline && before === undefined) report.added.push({ suite: suite.name, caseId: testCase.id });
      else if (before === true && !pass) report.regressions.push({ suite: suite.name, caseId: testCase.id });
      else if (before === false && pass) report.fixed.push({ suite: suite.name, caseId: testCase.id });
    }
    report.suites.push(suiteResult);
    report.totals.cases += suiteResult.cases.length;
    report.totals.passed += suiteResult.passed;
    report.totals.failed += suiteResult.failed;
  }
  if (options.baselinePath) {
    mkdirSync(dirname(options.baselinePath), { recursive: true });
    writeFileSync(
      options.baselinePath,
      `${JSON.stringify({ savedAt: options.now(), cases: { ...baseline, ...current } }, null, 2)}\n`,
    );
  }
  return report;

  async function checkAssertion(
    assertion: EvaluationAssertion,
    result: { taskId: string; status: WorkflowOutcome; output: unknown },
    context: typeof options,
  ): Promise<AssertionResult> {
    const value = getFieldPath(result.output, assertion.field_path);
    const base = {
      type: assertion.type,
      ...(assertion.field_path ? { fieldPath: assertion.field_path } : {}),
    };
    const where = assertion.field_path ? `output.${assertion.field_path}` : 'output';
    switch (assertion.type) {
      case 'equals': {
        const pass = deepEqual(value, assertion.expected);
        return {
          ...base,
          pass,
          message: pass
            ? `${where} equals the expected value`
            : `${where} is ${JSON.stringify(value)}, expected ${JSON.stringify(assertion.expected)}`,
        };
      }
      case 'contains': {
        const pass = contains(value, assertion.expected);
        return {
          ...base,
          pass,
          message: pass
            ? `${where} contains ${JSON.stringify(assertion.expected)}`
            : `${where} does not contain ${JSON.stringify(assertion.expected)}`,
        };
      }
      case 'status': {
        const pass = result.status === assertion.expected;
        return {
          ...base,
          pass,
          message: pass
            ? `status is ${result.status}`
            : `status is ${result.status}, expected ${String(assertion.expected)}`,
        };
      }
      case 'schema_valid': {
        let problem: string | undefined;
        if (typeof assertion.expected === 'string') {
          const check = context.schemaChecks.get(assertion.expected);
          problem = check ? check(value) : `no schema "${assertion.expected}" in schemas/`;
        } else if (typeof assertion.expected === 'object' && assertion.expected !== null) {
          problem = compileInputCheck(assertion.expected as Record<string, unknown>)(value);
        } else problem = 'expected names a schema id or holds an inline JSON Schema';
        return {
          ...base,
          pass: problem === undefined,
          message: problem === undefined ? `${where} matches the schema` : `${where}: ${problem}`,
        };
      }
      case 'custom': {
        const name =
          assertion.function ?? (typeof assertion.expected === 'string' ? assertion.expected : undefined);
        const custom = name ? await loadCustom(workflow, name, context.assertions) : undefined;
        if (!custom)
          return {
            ...base,
            pass: false,
            message: `custom assertion "${name ?? '(unnamed)'}" is not registered`,
          };
        try {
          const verdict = await custom({
            output: result.output,
            status: result.status,
            value,
            expected: assertion.expected,
            taskId: result.taskId,
          });
          const pass = typeof verdict === 'boolean' ? verdict : verdict.pass;
          const message =
            typeof verdict === 'object' && verdict.message
              ? verdict.message
              : `custom assertion "${name}" ${pass ? 'passed' : 'failed'}`;
          return { ...base, pass, message };
        } catch (error) {
          return {
            ...base,
            pass: false,
            message: `custom assertion "${name}" threw: ${(error as Error).message}`,
          };
        }
      }
    }
  }
}
