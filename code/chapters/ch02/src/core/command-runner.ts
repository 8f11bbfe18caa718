/** Port for running one shell command; `adapters/powershell.ts` implements it with PowerShell. */
export interface CommandRequest {
  readonly command: string;
  /** Absolute folder the command starts in. */
  readonly cwd: string;
  readonly timeoutMs?: number;
  /** Absolute path where output longer than the cap is saved in full; nothing is saved for shorter output. */
  readonly fullOutputPath?: string;
}

/** Output too long for the result, saved to a file instead. */
export interface SavedOutput {
  readonly path: string;
  readonly bytes: number;
  /** False when the file stopped at the runner's save cap before the output ended. */
  readonly complete: boolean;
}

export interface CommandResult {
  /** stdout and stderr merged in arrival order, cut to the runner's cap. */
  readonly output: string;
  /** `null` when the process was killed (timeout) before it exited by itself. */
  readonly exitCode: number | null;
  readonly timedOut: boolean;
  readonly truncated: boolean;
  /** Present when the output was truncated and saved to `fullOutputPath`. */
  readonly savedOutput?: SavedOutput;
}

export interface CommandRunner {
  run(request: CommandRequest): Promise<CommandResult>;
}

/** The shell executable could not be started at all (not installed, not executable). */
export class CommandStartError extends Error {
  override readonly name = "CommandStartError";
}
