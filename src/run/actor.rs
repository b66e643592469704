//! Who acts: the actor a run or an approval names, parsed from `--actor <type>:<id>`.

use crate::error::{Error, Result};
use crate::model::run::Actor;

pub fn parse_actor(spec: Option<&str>) -> Result<Actor> {
    let Some(spec) = spec else {
        let id = std::env::var("USER")
            .ok()
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "unknown".into());
        return Ok(Actor {
            kind: "human".into(),
            id,
        });
    };
    let (kind, id) = spec.split_once(':').ok_or_else(|| {
        Error::usage(format!("--actor {spec:?} is not <type>:<id>"))
            .hint("for example --actor agent:claude or --actor human:ada")
    })?;
    if !matches!(kind, "human" | "agent" | "ci" | "system") {
        return Err(Error::usage(format!(
            "--actor type {kind:?} is not one of human, agent, ci, system"
        )));
    }
    if id.is_empty() || id.chars().any(char::is_control) {
        return Err(Error::usage(
            "--actor needs a non-empty id without control characters",
        ));
    }
    Ok(Actor {
        kind: kind.into(),
        id: id.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors() {
        assert_eq!(parse_actor(Some("agent:claude")).unwrap().kind, "agent");
        assert!(parse_actor(Some("robot:x")).is_err());
        assert!(parse_actor(Some("agent")).is_err());
        assert!(parse_actor(Some("agent:")).is_err());
    }
}
