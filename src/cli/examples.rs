//! The `Examples:` block of each command's long help (`<command> --help`) and manual page: the
//! commands a person would type, one line each, with what they do when it is not obvious.

pub const TOOL: &str = "Examples:
  git tabellio demo                                        the whole life of a run, in a throwaway repository
  git tabellio start fix-1 --task \"Make the greeting say hello\"
  git tabellio finish fix-1 -- grep -q hello greeting.txt  an ad-hoc check, run without a shell
  git tabellio status fix-1                                state, evidence and the next command
  git tabellio promote fix-1                               main := exactly the validated commit
  git tabellio loop fix-1 -- ./agent.sh                    an agent and the checks, until validated
  git tabellio <command> --help                            a command's options, with examples";

pub const START: &str = "Examples:
  git tabellio start fix-1 --task \"Make the greeting say hello\"
  git tabellio start --task-file task.md --base main       a generated run id, printed
  printf 'Fix the flaky test\\n' | git tabellio start fix-2 --task-file - --actor agent:bot
  git tabellio start --base main --task-from fix-1         fix-1's task again, from main's tip
  git tabellio start fix-3 --task-file task.md --actor agent:bot@example.com \\
      --agent-name claude-code --model m-1 --initiator ada@example.com";

pub const CHECKPOINT: &str = "Examples:
  git tabellio checkpoint -m \"parser compiles\"            in the run's worktree
  git tabellio checkpoint fix-1                            summary: the head commit's subject";

pub const REWIND: &str = "Examples:
  git tabellio rewind fix-1 2                              back to checkpoint 2 (numbered as `log` shows)
  git tabellio rewind 3f2a9c1                              by commit prefix, in the run's worktree
  git tabellio rewind --force fix-1 1                      save uncommitted work as a checkpoint first";

pub const FINISH: &str = "Examples:
  git tabellio finish                                      the policy's required checks
  git tabellio finish fix-1 --check test                   one named policy check
  git tabellio finish fix-1 -- cargo test --locked         an ad-hoc check, run without a shell
  git tabellio finish --check unit --timeout 600 -- cargo test";

pub const PROMOTE: &str = "Examples:
  git tabellio promote fix-1 --dry-run                     say what would happen, write nothing
  git tabellio promote fix-1
  git tabellio promote fix-1 --remote origin               one atomic push of target, ledger, notes";

pub const LAND: &str = "Examples:
  git tabellio land                                        every completed run of the current branch
  git tabellio land fix-1 fix-2 --target main --batch 4    these runs, in this order
  git tabellio land --dry-run                              the plan: restacks, conflicts, which checks run
  git tabellio land fix-1 --squash --remote origin         one commit, one atomic push
  git tabellio land --enqueue fix-1 fix-2                  queue them, then land the queue
  git tabellio land --lanes 4 --remote origin              workers validate 4 candidates at a time
  git tabellio --json land --stats --target main           time in queue, executions, reuse, waste
  git tabellio land --reopen                               reopen what it refuses onto the new tip
  git tabellio land --until-empty --target main            land, reopen, repair with the runs' agents, until done";

pub const ENQUEUE: &str = "Examples:
  git tabellio enqueue fix-1 fix-2                         queue them for their target, in this order
  git tabellio enqueue hotfix --priority                   ahead of everything queued without it
  git tabellio enqueue fix-1 --remote origin               and publish the entry on origin";

pub const WORKER: &str = "Examples:
  git tabellio worker                                      validate this repository's candidates until stopped
  git tabellio worker --remote origin --lanes 2            two at once, claims and evidence on origin
  git tabellio worker --once --lease 900                   one pass, 15-minute claims";

pub const QUEUE: &str = "Examples:
  git tabellio queue                                       every target's queue
  git tabellio --json queue --target main                  position, state, estimated wait";

pub const REOPEN: &str = "Examples:
  git tabellio reopen fix-1                                onto the target's tip; conflicts written out
  git tabellio --json reopen fix-1                         the run, with reopen{mode, conflicts, base_before}";

pub const APPROVE: &str = "Examples:
  git tabellio approve fix-1 -m \"policy change reviewed\"      approve the run head's guarded changes
  git tabellio approve fix-1 --sign-key ~/.ssh/id_ed25519  signed, for a policy with trust";

pub const STATUS: &str = "Examples:
  git tabellio status                                      the run whose worktree you are in
  git tabellio --json status fix-1                         with allowed_actions and next_action";

pub const LIST: &str = "Examples:
  git tabellio list
  git tabellio list --state completed                      validated, not yet promoted";

pub const LOG: &str = "Examples:
  git tabellio log fix-1
  git log --oneline refs/tabellio/runs/fix-1               the same ledger, read by stock git
  git tabellio log --graph                                 every run as a lane off its base
  git tabellio log --graph fix-1 fix-2                     these runs, in this order
  git tabellio log --html report.html                      a self-contained page: timeline, checks, output
  git tabellio log --html fix-1.html fix-1                 one run's page, to attach to a review";

pub const ABANDON: &str = "Examples:
  git tabellio abandon fix-1 -m \"superseded by fix-2\"";

pub const CLEANUP: &str = "Examples:
  git tabellio cleanup fix-1                               from the main worktree, not the run's
  git tabellio cleanup fix-1 --force                       also discard an abandoned run's work";

pub const GC: &str = "Examples:
  git tabellio gc --dry-run                                what would be archived, and why runs are kept
  git tabellio gc                                          archive runs that ended 90 days ago (or the policy's age)
  git tabellio gc --archive-after 2w                       runs that ended two weeks ago
  git -C /srv/git/repo.git tabellio gc                     on a server, from cron (see hooks install --server)";

pub const BLAME: &str = "Examples:
  git tabellio blame src/main.rs                           line, commit, run, actor
  git tabellio blame src/main.rs v1.2 --porcelain          git's format, plus tabellio-run/-actor lines
  git tabellio --json blame migrations/001.sql             every line with its run, actor and initiator";

pub const EVIDENCE: &str = "Examples:
  git tabellio evidence                                    on HEAD (and its tree)
  git tabellio evidence main
  git tabellio evidence 'main^{tree}'                      on a tree: evidence for the same content";

pub const CHECKS: &str = "Examples:
  git tabellio checks                                      executions, flake rate, mean duration
  git tabellio checks --check test                         one check
  git tabellio --json checks --at main                     judged by main's policy (max_flake_rate)";

pub const DEMO: &str = "Examples:
  git tabellio demo
  git tabellio demo --keep                                 keep the repository and print where it is
  git tabellio --json demo                                 one JSON object per step";

pub const PLANS: &str = "Examples:
  git tabellio plans                                       where the run's plans stand
  git tabellio plans reconcile --commit                    move misplaced plans and commit the moves";

pub const PLANS_STATUS: &str = "Examples:
  git tabellio plans status fix-1
  git tabellio plans status --dir .                        plans/ and plans_completed/ in this directory";

pub const PLANS_RECONCILE: &str = "Examples:
  git tabellio plans reconcile                             stage the moves in the index
  git tabellio plans reconcile fix-1 --commit";

pub const VALIDATE: &str = "Examples:
  git tabellio validate                                    HEAD, the policy's required checks
  git tabellio validate origin/main --check test
  git tabellio validate HEAD -- make lint                  an ad-hoc check, run without a shell
  git tabellio validate HEAD --policy-from origin/main     checks as the protected branch defines them";

pub const VERIFY: &str = "Examples:
  git tabellio verify                                      HEAD
  git tabellio verify origin/main..HEAD                    every commit of a pull request
  git tabellio verify --first-parent v1.0..main            every commit main pointed at, landed by runs
  git tabellio verify HEAD --check test --policy-from origin/main";

pub const HOOKS: &str = "Examples:
  git tabellio hooks install                               reference-transaction and pre-push
  git tabellio hooks install --server                      pre-receive, in a bare repository";

pub const HOOKS_INSTALL: &str = "Examples:
  git tabellio hooks install
  git tabellio hooks install --force                       move other hooks aside to NAME.pre-tabellio";

pub const HOOK: &str = "Examples:
  git tabellio hook pre-push origin https://example.com/o/n.git < ref-lines
  (the installed shims run this; a person rarely does)";

pub const INIT: &str = "Examples:
  git tabellio init                                        every remote, and the exclude line
  git tabellio init --remote origin --hooks";

pub const SYNC: &str = "Examples:
  git tabellio sync
  git tabellio sync upstream";

pub const LOOP: &str = "Examples:
  git tabellio loop fix-1 -- ./agent.sh                    the agent reads $TABELLIO_CONTEXT
  git tabellio loop fix-1 --max-loops 10 --agent-timeout 15m --promote -- ./agent.sh
  git tabellio loop fix-1 --resume                         after an interrupt or a crash
  git tabellio loop fix-1                                  a reopened run: its agent repairs it";

pub const CONTEXT: &str = "Examples:
  git tabellio context fix-1 > review.md
  git tabellio context fix-1 --format json";

pub const EXPORT: &str = "Examples:
  git tabellio export fix-1 --out fix-1.json
  git tabellio export fix-1 --format in-toto               a Statement about the validated commit
  git tabellio export --vsa main                           the verification summary noted on main's tip";

pub const MAN: &str = "Examples:
  git tabellio man | man -l -                 read the page without installing it
  git tabellio man --install                  next to the binary: <prefix>/share/man/man1
  git tabellio man --install ~/.local/share/man/man1";

pub const COMPLETIONS: &str = "Examples:
  git tabellio completions bash               print the script; to install it where bash finds it:
  mkdir -p ~/.local/share/bash-completion/completions
  git tabellio completions bash > ~/.local/share/bash-completion/completions/git-tabellio
  mkdir -p ~/.zfunc                                   # and fpath=(~/.zfunc $fpath) in ~/.zshrc
  git tabellio completions zsh > ~/.zfunc/_git-tabellio
  mkdir -p ~/.config/fish/completions
  git tabellio completions fish > ~/.config/fish/completions/git-tabellio.fish";
