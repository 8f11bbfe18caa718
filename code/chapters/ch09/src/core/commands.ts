/** What one command produced. `adapters/powershell.ts` fills it in; the `shell` tool reads it. */
export interface CommandResult {
  /** stdout and stderr merged in arrival order, cut to the runner's cap. */
  readonly output: string;
  /** `null` when the process was killed (timeout) before it exited by itself. */
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  /** True when the output went past the cap and only its start is in `output`. */
  readonly truncated: boolean;
}

/** Port for running one shell command in a folder; it rejects only when the process cannot start. */
export interface CommandRunner {
  run(command: string, cwd: string): Promise<CommandResult>;
}
