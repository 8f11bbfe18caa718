import type { CommandResult, CommandRunner } from "../../src/core/commands.js";
import { PermissionDecision, type ApprovalProvider, type PermissionRequest } from "../../src/core/permissions.js";
import {
  FileNotFoundError,
  TextNotFoundError,
  type WorkspaceFileSystem,
  type WorkspaceWriteBoundary,
} from "../../src/core/filesystem.js";

/** A command that printed `output` and exited 0: the fields a `CommandResult` leaves unsaid, filled in. */
export function commandResult(fields: Partial<CommandResult> = {}): CommandResult {
  return { output: "a.txt", exitCode: 0, timedOut: false, truncated: false, ...fields };
}

/** One `run(command, cwd)` as the fake saw it. */
export interface RecordedCommand {
  readonly command: string;
  readonly cwd: string;
}

/** What a `FakeCommandRunner` answers: one fixed result, or a function of the call (which may throw). */
export type FakeAnswer = CommandResult | ((command: string, cwd: string, index: number) => CommandResult);

/** A `CommandRunner` that runs nothing: it records each `(command, cwd)` and answers a fixed or per-call result. */
export class FakeCommandRunner implements CommandRunner {
  readonly calls: RecordedCommand[] = [];

  constructor(private readonly answer: FakeAnswer = commandResult()) {}

  run(command: string, cwd: string): Promise<CommandResult> {
    const index = this.calls.length;
    this.calls.push({ command, cwd });
    try {
      return Promise.resolve(typeof this.answer === "function" ? this.answer(command, cwd, index) : this.answer);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }
}

/** A `FakeCommandRunner` whose every call rejects, as `PowerShellRunner` does when no process starts. */
export function unstartableRunner(): FakeCommandRunner {
  return new FakeCommandRunner(() => {
    throw new Error("spawn pwsh ENOENT");
  });
}

/** What an approval provider was shown, in a shape every chapter's tests can compare. */
export interface SeenApproval {
  readonly toolName: string;
  /** The reason of the ask it was given to settle (`request.proposedDecision`). */
  readonly reason: string | undefined;
  readonly arguments: unknown;
}

/**
 * An `ApprovalProvider` that counts its calls in `requests` and answers `answer` (a value, or a
 * function of what it was shown): `true` and `false` become allow and deny decisions from `user`;
 * anything else is returned as it is, so a non-decision such as `"yes"` reaches the policy unchanged.
 * `received` keeps the `PermissionRequest` objects themselves.
 */
export class CountingApproval implements ApprovalProvider {
  readonly requests: SeenApproval[] = [];
  readonly received: PermissionRequest[] = [];

  constructor(private readonly answer: unknown = true) {}

  async decide(request: PermissionRequest): Promise<PermissionDecision> {
    const seen = {
      toolName: request.toolName,
      reason: request.proposedDecision?.reason,
      arguments: request.prepared.arguments,
    };
    this.requests.push(seen);
    this.received.push(request);
    const answer: unknown =
      typeof this.answer === "function" ? await (this.answer as (seen: SeenApproval) => unknown)(seen) : this.answer;
    if (answer === true) return new PermissionDecision("allow", "Approved in the test", "user");
    if (answer === false) return new PermissionDecision("deny", "The user did not approve this tool call", "user");
    return answer as PermissionDecision;
  }
}

/** What a boundary was asked: the workspace first, then the model's path as it came. */
export type SeenBoundaryCall = readonly [workspace: string, relativePath: string];

/**
 * A `WorkspaceWriteBoundary` that records every `(workspace, relativePath)` it judges in `calls` and
 * answers `answer` (a value, or a function of the call, which may throw or reject) exactly as it is,
 * so a non-boolean such as `"yes"` reaches the policy unchanged.
 */
export class FakeBoundary implements WorkspaceWriteBoundary {
  readonly calls: SeenBoundaryCall[] = [];

  constructor(private readonly answer: unknown) {}

  async isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean> {
    this.calls.push([workspace, relativePath]);
    const answer: unknown =
      typeof this.answer === "function"
        ? await (this.answer as (workspace: string, relativePath: string) => unknown)(workspace, relativePath)
        : this.answer;
    return answer as boolean;
  }
}

/** What a `WorkspaceFileSystem` was asked, method name first, then its arguments, the workspace first. */
export type SeenFileCall =
  | readonly ["readFile", string, string, number | undefined]
  | readonly ["writeFile", string, string, string]
  | readonly ["editFile", string, string, string, string]
  | readonly ["globFiles", string, string];

/**
 * A `WorkspaceFileSystem` that touches no disk: files live in a map keyed by the model's own path,
 * `globFiles` lists every file whatever the pattern, and every call is recorded with the workspace it
 * was given. `failures` makes any call on a path throw the error set for it, so a test can hand a
 * tool each domain error without building it on a disk. Proves the file tools go through the port.
 */
export class FakeFileSystem implements WorkspaceFileSystem {
  readonly calls: SeenFileCall[] = [];
  /** Every `isPathWithinWorkspace` question, apart from `calls`, so the file calls read as before chapter 3. */
  readonly boundaryCalls: SeenBoundaryCall[] = [];
  readonly files: Map<string, string>;
  readonly failures = new Map<string, Error>();

  constructor(files: Record<string, string> = {}) {
    this.files = new Map(Object.entries(files));
  }

  readFile(workspace: string, relativePath: string, limit?: number): Promise<string> {
    this.calls.push(["readFile", workspace, relativePath, limit]);
    return this.#attempt(relativePath, () => {
      const text = this.#existing(relativePath);
      if (limit === undefined) return text;
      const lines = text.split("\n");
      if (lines.at(-1) === "") lines.pop();
      if (lines.length <= limit) return text;
      return `${lines.slice(0, limit).join("\n")}\n... (${lines.length - limit} more lines)`;
    });
  }

  writeFile(workspace: string, relativePath: string, content: string): Promise<number> {
    this.calls.push(["writeFile", workspace, relativePath, content]);
    return this.#attempt(relativePath, () => {
      this.files.set(relativePath, content);
      return Buffer.byteLength(content, "utf8");
    });
  }

  editFile(workspace: string, relativePath: string, oldText: string, newText: string): Promise<void> {
    this.calls.push(["editFile", workspace, relativePath, oldText, newText]);
    return this.#attempt(relativePath, () => {
      const current = this.#existing(relativePath);
      const at = current.indexOf(oldText);
      if (at === -1) throw new TextNotFoundError(`Exact text not found in ${relativePath}`);
      this.files.set(relativePath, current.slice(0, at) + newText + current.slice(at + oldText.length));
    });
  }

  globFiles(workspace: string, pattern: string): Promise<readonly string[]> {
    this.calls.push(["globFiles", workspace, pattern]);
    return this.#attempt(pattern, () => [...this.files.keys()].sort());
  }

  /** Outside: an absolute path, a drive or UNC prefix, or any `..` segment; the rest is inside. */
  isPathWithinWorkspace(workspace: string, relativePath: string): Promise<boolean> {
    this.boundaryCalls.push([workspace, relativePath]);
    const outside = /^([\\/]|[A-Za-z]:)/.test(relativePath) || relativePath.split(/[\\/]/).includes("..");
    return Promise.resolve(!outside);
  }

  #attempt<T>(key: string, operation: () => T): Promise<T> {
    try {
      const failure = this.failures.get(key);
      if (failure !== undefined) throw failure;
      return Promise.resolve(operation());
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  #existing(relativePath: string): string {
    const text = this.files.get(relativePath);
    if (text === undefined) throw new FileNotFoundError(`File not found: ${relativePath}`);
    return text;
  }
}
