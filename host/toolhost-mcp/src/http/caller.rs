//! Who sent a request that passed the admission checks ([`Caller`]): the principal its
//! bearer token names, what its sessions and tasks are bound to.

/// Who sent a request that passed the checks ([`App::admit`](super::App::admit)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Caller {
    /// The name its static token was given, if any; for an OAuth token, its `sub`.
    pub(super) client: Option<String>,
    /// Which static token it presented (its place in the token file), `None` on a
    /// server without tokens or for an OAuth token: whom the tasks it starts without a
    /// session belong to.
    pub(super) token: Option<usize>,
    /// The scopes its bearer token granted (OAuth); empty for a static token.
    pub(super) scopes: Vec<String>,
    /// The issuer of its OAuth token; `None` for a static token (or none).
    pub(super) issuer: Option<String>,
}

impl Caller {
    /// Who it is to a policy: its client name, scopes and issuer.
    pub(super) fn principal(&self) -> crate::policy::Principal<'_> {
        crate::policy::Principal::new(self.client.as_deref(), &self.scopes)
            .with_issuer(self.issuer.as_deref())
    }

    /// What its session ids are bound to ([`super::SessionKey::issue`]): a static
    /// token's client name (as before OAuth), or for an OAuth principal its issuer and
    /// `sub` joined by NUL, which no client name has: the two never meet, and the same
    /// `sub` from two issuers is two principals.
    pub(super) fn binding(&self) -> Option<std::borrow::Cow<'_, str>> {
        match (&self.issuer, &self.client) {
            (Some(issuer), Some(sub)) => {
                Some(std::borrow::Cow::Owned(format!("oauth\0{issuer}\0{sub}")))
            }
            (_, client) => client.as_deref().map(std::borrow::Cow::Borrowed),
        }
    }
}
