/**
 * PowerShell that prints `mebibytes` MiB of `x` lines (1 MiB each). It writes bytes to the raw stdout
 * stream: `[Console]::Out.Write` goes through a small autoflushing buffer and is ~10x slower here, which
 * would time PowerShell's console writer instead of the runner.
 */
export function floodCommand(mebibytes: number): string {
  return (
    "$out = [Console]::OpenStandardOutput(); $line = [byte[]]::new(1048576); [Array]::Fill($line, [byte]120); " +
    `$line[1048575] = 10; for ($i = 0; $i -lt ${mebibytes}; $i++) { $out.Write($line, 0, $line.Length) }; $out.Flush()`
  );
}

/** Copy of the prelude in code/chapters/ch03/src/adapters/powershell.ts, to tell its cost from Node's. */
export const RUNNER_PRELUDE =
  "[Console]::OutputEncoding = [System.Text.UTF8Encoding]::new($false); " +
  "$OutputEncoding = [Console]::OutputEncoding; $ProgressPreference = 'SilentlyContinue'\n";
