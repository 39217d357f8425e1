//! Every variable of the table read from one source and checked against its own rule, in table
//! order, before any rule that relates two variables runs. What is left is typed values the
//! [`super::Config`] builder takes one by one.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use super::inline_hosts::InlineHosts;
use super::proxies::TrustedProxies;
use super::rules::Parsed;
use super::table::{self, Fallback, VARIABLES};
use super::{ConfigError, ConfigSource, invalid};

/// The parsed value of every variable that is set or has a default value.
pub(super) struct Values {
    parsed: HashMap<&'static str, Parsed>,
}

impl Values {
    /// Reads every variable of the table; a blank value counts as unset. The first value that
    /// breaks its rule stops the read, naming its variable.
    pub(super) fn read(source: &dyn ConfigSource) -> Result<Values, ConfigError> {
        let mut parsed = HashMap::with_capacity(VARIABLES.len());
        for variable in VARIABLES {
            let set = source
                .get(variable.name)
                .filter(|value| !value.trim().is_empty());
            let text = match (&set, variable.default) {
                (Some(value), _) => value.as_str(),
                (None, Fallback::Value(default)) => default,
                (None, Fallback::Described(_)) => continue,
            };
            let value = variable
                .rule
                .parse(text)
                .map_err(|reason| invalid(variable.name, reason))?;
            parsed.insert(variable.name, value);
        }
        Ok(Values { parsed })
    }

    /// Whether the builder took every value that was read.
    pub(super) fn is_drained(&self) -> bool {
        self.parsed.is_empty()
    }

    /// The variables whose values nobody took.
    pub(super) fn leftover(&self) -> Vec<&'static str> {
        self.parsed.keys().copied().collect()
    }

    /// Takes the value of `name`: `None` when it is unset and has no default value. A name the
    /// table lacks is an error (a mistake in this crate, which the tests catch).
    fn take(&mut self, name: &'static str) -> Result<Option<Parsed>, ConfigError> {
        if table::variable(name).is_none() {
            return Err(invalid(name, "is not in the configuration table"));
        }
        Ok(self.parsed.remove(name))
    }

    fn take_required(&mut self, name: &'static str) -> Result<Parsed, ConfigError> {
        self.take(name)?
            .ok_or_else(|| invalid(name, "has no default value in the configuration table"))
    }

    pub(super) fn text(&mut self, name: &'static str) -> Result<Option<String>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::Text(text)) => Ok(Some(text)),
            Some(_) => Err(not_of_kind(name, "text")),
        }
    }

    pub(super) fn required_text(&mut self, name: &'static str) -> Result<String, ConfigError> {
        match self.take_required(name)? {
            Parsed::Text(text) => Ok(text),
            _ => Err(not_of_kind(name, "text")),
        }
    }

    /// A number, converted to the field's type (the rule's range keeps it in that type).
    pub(super) fn number<T: TryFrom<u64>>(&mut self, name: &'static str) -> Result<T, ConfigError> {
        match self.take_required(name)? {
            Parsed::Number(number) => T::try_from(number)
                .map_err(|_| invalid(name, format!("{number} does not fit the setting"))),
            _ => Err(not_of_kind(name, "a number")),
        }
    }

    /// A number that may be unset (its default is described, not a value).
    pub(super) fn optional_number<T: TryFrom<u64>>(
        &mut self,
        name: &'static str,
    ) -> Result<Option<T>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::Number(number)) => T::try_from(number)
                .map(Some)
                .map_err(|_| invalid(name, format!("{number} does not fit the setting"))),
            Some(_) => Err(not_of_kind(name, "a number")),
        }
    }

    pub(super) fn flag(&mut self, name: &'static str) -> Result<bool, ConfigError> {
        match self.take_required(name)? {
            Parsed::Flag(flag) => Ok(flag),
            _ => Err(not_of_kind(name, "a flag")),
        }
    }

    pub(super) fn ip(&mut self, name: &'static str) -> Result<Option<IpAddr>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::Ip(ip)) => Ok(Some(ip)),
            Some(_) => Err(not_of_kind(name, "an IP address")),
        }
    }

    pub(super) fn required_ip(&mut self, name: &'static str) -> Result<IpAddr, ConfigError> {
        match self.take_required(name)? {
            Parsed::Ip(ip) => Ok(ip),
            _ => Err(not_of_kind(name, "an IP address")),
        }
    }

    pub(super) fn socket_addr(&mut self, name: &'static str) -> Result<SocketAddr, ConfigError> {
        match self.take_required(name)? {
            Parsed::SocketAddr(addr) => Ok(addr),
            _ => Err(not_of_kind(name, "host:port")),
        }
    }

    pub(super) fn optional_socket_addr(
        &mut self,
        name: &'static str,
    ) -> Result<Option<SocketAddr>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::SocketAddr(addr)) => Ok(Some(addr)),
            Some(_) => Err(not_of_kind(name, "host:port")),
        }
    }

    pub(super) fn ip_ranges(
        &mut self,
        name: &'static str,
    ) -> Result<Option<TrustedProxies>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::IpRanges(ranges)) => Ok(Some(ranges)),
            Some(_) => Err(not_of_kind(name, "IP ranges")),
        }
    }

    pub(super) fn inline_hosts(
        &mut self,
        name: &'static str,
    ) -> Result<Option<InlineHosts>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::InlineHosts(hosts)) => Ok(Some(hosts)),
            Some(_) => Err(not_of_kind(name, "inline hosts")),
        }
    }

    pub(super) fn asset_names(
        &mut self,
        name: &'static str,
    ) -> Result<Option<Vec<String>>, ConfigError> {
        match self.take(name)? {
            None => Ok(None),
            Some(Parsed::AssetNames(names)) => Ok(Some(names)),
            Some(_) => Err(not_of_kind(name, "asset names")),
        }
    }
}

/// The builder asked for a kind of value the table's rule does not give (a mistake in this
/// crate, which the tests catch).
fn not_of_kind(name: &'static str, kind: &str) -> ConfigError {
    invalid(
        name,
        format!("the configuration table's rule does not give {kind}"),
    )
}
