/** What `run` throws, as the agentd error it is expected to be; fails the test when it returns instead. */
export function thrownBy(run: () => unknown) {
  try {
    run();
  } catch (error) {
    return error as { code: string; fault: string; message: string; details?: Record<string, unknown> };
  }
  throw new Error('expected an error, and none was thrown');
}
